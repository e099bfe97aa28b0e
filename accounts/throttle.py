"""Sign-in throttling, counted in Redis so that every web process shares it.

Failures are counted per account (the username as typed, case-folded, whether or not such an
account exists: the answer never tells which) and per client address, in a window. Past the
limit the account or the address is locked; each further lock within a day lasts twice as long
(backoff), up to a cap. A locked sign-in is refused before the password is hashed, so a guesser
costs no CPU; the right password is refused too while locked. Hashing itself is bounded per
process (a semaphore): password hashing is deliberately slow, and unbounded it took the cores
from every other request.

Redis not answering fails closed (sign-in refused for now), as the runtime's limiter does.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import threading
from dataclasses import dataclass

import redis
from django.conf import settings
from redis.exceptions import RedisError

STRIKES_TTL_S = 86400  # how long earlier locks count towards the next one's length


@functools.cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)


class ThrottleUnavailableError(Exception):
    """Redis did not answer: nobody signs in uncounted."""


@dataclass(frozen=True)
class Lock:
    scope: str  # "account" | "address"
    retry_after_s: int


@dataclass(frozen=True)
class Failure:
    """What one failed sign-in led to: the lock it set, if it set one."""

    locked: Lock | None
    failures: int


def _subject(username: str) -> str:
    return hashlib.sha256(username.strip().casefold().encode("utf-8", "surrogatepass")).hexdigest()


def _keys(scope: str, subject: str) -> tuple[str, str, str]:
    base = f"accounts:login:{scope}:{subject}"
    return f"{base}:failures", f"{base}:lock", f"{base}:strikes"


def _subjects(username: str, address: str) -> list[tuple[str, str, int]]:
    return [
        ("account", _subject(username), settings.LOGIN_MAX_FAILURES_PER_ACCOUNT),
        ("address", address or "unknown", settings.LOGIN_MAX_FAILURES_PER_ADDRESS),
    ]


def login_locked(*, username: str, address: str) -> Lock | None:
    """The lock that refuses this sign-in now (the longer one), or None."""
    try:
        pipe = _redis().pipeline(transaction=False)
        for scope, subject, _ in _subjects(username, address):
            pipe.ttl(_keys(scope, subject)[1])
        ttls = pipe.execute()
    except RedisError as exc:
        raise ThrottleUnavailableError from exc
    locks = [
        Lock(scope=scope, retry_after_s=ttl)
        for (scope, _, _), ttl in zip(_subjects(username, address), ttls, strict=True)
        if ttl and ttl > 0
    ]
    return max(locks, key=lambda lock: lock.retry_after_s, default=None)


def login_failed(*, username: str, address: str) -> Failure:
    """Count one failed sign-in for the account and the address; lock the one past its limit
    for LOGIN_LOCKOUT_SECONDS, doubled for each earlier lock within a day, at most
    LOGIN_LOCKOUT_MAX_SECONDS."""
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    locked: Lock | None = None
    account_failures = 0
    try:
        client = _redis()
        for scope, subject, limit in _subjects(username, address):
            failures_key, lock_key, strikes_key = _keys(scope, subject)
            # One statement per command, not chained: redis-py types a pipeline's commands
            # as the client's (they return the pipeline only at run time).
            pipe = client.pipeline(transaction=False)
            pipe.incr(failures_key)
            pipe.expire(failures_key, window)
            failures, _ = pipe.execute()
            if scope == "account":
                account_failures = failures
            if failures < limit:
                continue
            pipe = client.pipeline(transaction=False)
            pipe.incr(strikes_key)
            pipe.expire(strikes_key, STRIKES_TTL_S)
            strikes, _ = pipe.execute()
            seconds = min(
                settings.LOGIN_LOCKOUT_SECONDS * 2 ** (strikes - 1),
                settings.LOGIN_LOCKOUT_MAX_SECONDS,
            )
            pipe = client.pipeline(transaction=True)
            pipe.set(lock_key, scope, ex=seconds)
            pipe.delete(failures_key)
            pipe.execute()
            if locked is None or seconds > locked.retry_after_s:
                locked = Lock(scope=scope, retry_after_s=seconds)
    except RedisError as exc:
        raise ThrottleUnavailableError from exc
    return Failure(locked=locked, failures=account_failures)


def login_succeeded(*, username: str) -> None:
    """The account's failures start again from nothing (the address's do not: one right
    password does not excuse a guesser's other names)."""
    failures_key, _, strikes_key = _keys("account", _subject(username))
    with contextlib.suppress(RedisError):  # the count only errs towards locking sooner
        _redis().delete(failures_key, strikes_key)


def login_unlock(*, username: str = "", address: str = "") -> int:
    """Lift the locks and counts of an account and/or an address; how many keys went."""
    keys: list[str] = []
    if username:
        keys += _keys("account", _subject(username))
    if address:
        keys += _keys("address", address)
    return int(_redis().delete(*keys)) if keys else 0


# --- hashing ---------------------------------------------------------------------------------------

_hashing: threading.BoundedSemaphore | None = None
_hashing_lock = threading.Lock()


def hashing_slot() -> threading.BoundedSemaphore:
    """The process's bound on concurrent password checks (LOGIN_HASH_CONCURRENCY)."""
    global _hashing
    with _hashing_lock:
        if _hashing is None:
            _hashing = threading.BoundedSemaphore(settings.LOGIN_HASH_CONCURRENCY)
        return _hashing
