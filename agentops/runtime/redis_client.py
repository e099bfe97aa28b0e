from __future__ import annotations

import functools

import redis
from django.conf import settings


@functools.cache
def get_redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)
