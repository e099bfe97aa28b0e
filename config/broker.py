"""The Celery broker transport: kombu's Redis transport, with one fault of it fixed.

A worker that loses Redis closes its broker connection twice: once while collecting it (Celery's
``on_connection_error_after_connected``), when the read of the dead socket fails before the
channel is marked closed and the transport is then detached from its connection; and once more
when the consumer releases it. That second close tries to put the worker's unacknowledged
messages back through a transport that has no connection any more and raises AttributeError,
which is not a connection error: the consumer does not reconnect, the worker shuts down, and
every run waits for a process supervisor (tests/chaos, test_redis_restarted_mid_run, caught it:
all five runs of a trial stuck at turn 0).

Nothing is lost by not putting them back there: they are still in Redis's unacknowledged set
(when Redis kept its data), which the transport restores after the visibility timeout, and the
sweeper re-enqueues the work of any run that has not moved long before that (the runtime takes
duplicate deliveries)."""

from __future__ import annotations

import logging

from kombu.transport import redis

log = logging.getLogger(__name__)


class Channel(redis.Channel):
    def close(self) -> None:
        try:
            super().close()
        except AttributeError:
            if self.connection.client is not None:
                raise
            self.closed = True
            log.warning(
                "broker channel closed after its connection was gone; its unacknowledged "
                "messages stay in Redis until the visibility timeout"
            )


class Transport(redis.Transport):
    Channel = Channel
