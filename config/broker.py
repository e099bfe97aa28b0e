"""The Celery broker transport: kombu's Redis transport, with one fault of it fixed.

When a worker loses Redis, Celery collects the broken connection: the transport is detached from
it, but its channel lives on in two places that use it afterwards. The consumer closes the
connection once more, and the channel tries to put the worker's unacknowledged messages back;
a task that was running during the outage finishes, and its acknowledgement goes through the old
channel once the worker has reconnected. Both ask the detached transport for its connection
parameters, and kombu raises AttributeError there ('NoneType' object has no attribute
'hostname'). That is not a connection error, so the consumer does not reconnect: the worker
shuts down and every run waits for a process supervisor (tests/chaos,
test_redis_restarted_mid_run, caught both: every run of a trial stuck at turn 0).

Here the old channel raises a connection error instead, which kombu and Celery handle as they
do any lost broker: the close goes on, the acknowledgement is logged as not made. Nothing is
lost by it: the message stays in Redis's unacknowledged set (when Redis kept its data) and comes
back after the visibility timeout, and the sweeper re-enqueues the work of any run that has not
moved long before that (the runtime takes duplicate deliveries).

The channel also keeps one synchronous Redis client on its pool, where kombu builds a new one
(``redis.Redis.__init__``: its response callbacks and options, about 0.1 ms of CPU) for every
publish, delivery and acknowledgement. A client holds no connection of its own (the pool lends
one per command) and is thread-safe; when kombu lets the pool go, the next call builds a client
on the new one."""

from __future__ import annotations

from typing import Any

from kombu.transport import redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(redis.Channel):
    _sync_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[misc]  # untyped in kombu
        pool = self.pool
        if self._sync_client is None or self._sync_client.connection_pool is not pool:
            self._sync_client = super()._create_client()  # type: ignore[misc]  # untyped in kombu
        return self._sync_client

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise RedisConnectionError("this broker channel's connection was closed")
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]  # untyped in kombu


class Transport(redis.Transport):
    Channel = Channel
