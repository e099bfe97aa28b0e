"""Fixed-window rate limits per subject, counted in Redis so that every web and worker process
shares them. The clock is an attribute, so tests move time instead of waiting for it."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from redis.exceptions import RedisError

from agentops.runtime.redis_client import get_redis
from agentops.runtime.timing import RATE_WINDOW_S


class LimiterUnavailableError(Exception):
    """Redis did not answer the count: the call is refused for now (never let through uncounted,
    never a server error)."""

    retry_after_ms = 1000


# A Redis restart or failover takes a second or two: the count is asked again after these pauses
# before the call is refused (a retried INCR whose first answer was lost counts twice, which
# errs on the safe side). Only an outage ever waits.
UNAVAILABLE_RETRY_DELAYS_S = (0.2, 0.4, 0.8, 1.6)


class RateLimiter:
    def __init__(self, *, bucket: str, setting: str, clock: Callable[[], float] = time.time):
        self.bucket, self.setting, self.clock = bucket, setting, clock

    @property
    def limit(self) -> int:
        return int(getattr(settings, self.setting))

    def hit(self, subject_id: int) -> int | None:
        """Count one use. None if within the limit, else milliseconds until the window ends.
        Raises LimiterUnavailableError when Redis does not answer, asked again after each pause
        of UNAVAILABLE_RETRY_DELAYS_S."""
        now = self.clock()
        window = int(now // RATE_WINDOW_S)
        key = f"agentops:rate:{self.bucket}:{subject_id}:{window}"
        for pause in (*UNAVAILABLE_RETRY_DELAYS_S, None):
            pipe = get_redis().pipeline(transaction=False)
            pipe.incr(key)
            pipe.expire(key, 2 * RATE_WINDOW_S)
            try:
                count, _ = pipe.execute()
                break
            # redis-py can also fail with OSError or ValueError ("I/O operation on closed file")
            # when a pooled connection breaks mid-handshake (seen in tests/chaos with workers
            # killed), and with AttributeError ("'NoneType' object has no attribute
            # 'readline'") when a connection is closed under a thread reading it (redis-py's
            # known race, redis/redis-py#4147; seen once in tests/chaos as four threads of a new
            # worker counted at once): the same outage, asked again.
            except (RedisError, OSError, ValueError, AttributeError) as exc:
                if pause is None:
                    raise LimiterUnavailableError from exc
                time.sleep(pause)
        if count <= self.limit:
            return None
        return max(1, int((RATE_WINDOW_S - now % RATE_WINDOW_S) * 1000))


tool_calls = RateLimiter(bucket="calls", setting="AGENT_RATE_LIMIT_PER_MINUTE")
run_starts = RateLimiter(bucket="runs", setting="AGENT_RUN_RATE_LIMIT_PER_MINUTE")
