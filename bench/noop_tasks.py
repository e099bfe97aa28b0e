"""A chain of no-op Celery tasks: the floor under a run's hops (bench/runtime_overhead.py).

The worker imports this module only when started with `-I bench.noop_tasks`. Each hop is
delivered like a runtime task (same broker, queue, acks_late, JSON) and does nothing but send the
next one; the last hop pushes its wall-clock time to a Redis list the benchmark waits on.
"""

from __future__ import annotations

import time

from celery import shared_task


@shared_task(acks_late=True, name="bench.noop_hop")
def noop_hop(remaining: int, key: str) -> None:
    if remaining > 1:
        noop_hop.delay(remaining - 1, key)
        return
    from agentops.runtime.redis_client import get_redis

    get_redis().rpush(key, repr(time.time()))
