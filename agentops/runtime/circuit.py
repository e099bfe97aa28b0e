"""A circuit breaker per tool (seed 001's feedback contract: a failing tool must not hang every
conversation). After ``TOOL_CIRCUIT_FAILURES`` transient failures (timeouts, unavailability,
unknown outcomes) within ``TOOL_CIRCUIT_WINDOW_S``, the tool's circuit opens: for
``TOOL_CIRCUIT_COOLDOWN_S`` every call of it is refused at once, yellow, with ``retry_after_ms``
and nothing run. After the cool-down the next call goes through (half-open): a success closes
the circuit, another failure opens it again. Kept in Redis, so every worker and web process
sees the same circuit; operators see open circuits on the reconciliation queue's page."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from agentops.contract import Reason, failure
from agentops.runtime.redis_client import get_redis

_PREFIX = "agentops:circuit"


def _failures_key(tool: str) -> str:
    return f"{_PREFIX}:failures:{tool}"


def _open_key(tool: str) -> str:
    return f"{_PREFIX}:open:{tool}"


@dataclass(frozen=True)
class CircuitState:
    """What one round trip before a call says: the fast refusal while the tool's circuit is
    open (None to call it), and whether failures of it are being counted (so that a success
    has a count to clear)."""

    refusal: dict | None
    failures_counted: bool


def circuit_check(tool: str) -> CircuitState:
    """The tool's circuit before a call, in one round trip (PTTL of the open mark, EXISTS of
    the failure count). A success then costs no command unless failures were counted; one
    that another call counts in between is left for the window to expire or for the next
    success to clear."""
    with get_redis().pipeline(transaction=False) as pipe:
        pipe.pttl(_open_key(tool))
        pipe.exists(_failures_key(tool))
        ttl_ms, counted = pipe.execute()
    if ttl_ms is None or ttl_ms <= 0:
        return CircuitState(None, bool(counted))
    refusal = failure(
        Reason.UNAVAILABLE,
        "circuit_open",
        f"{tool} failed repeatedly just now; calls to it pause for a moment.",
        "Wait, then try once more; nothing was done.",
        int(ttl_ms),
    )
    return CircuitState(refusal, bool(counted))


def circuit_record(tool: str, *, failed: bool, failures_counted: bool, cause: str = "") -> None:
    """Count a transient failure (opening the circuit at the threshold, with the last failure's
    ``cause`` for operators), or close the circuit on a success when ``circuit_check`` saw
    failures counted."""
    redis = get_redis()
    key = _failures_key(tool)
    if not failed:
        if failures_counted:
            redis.delete(key, _open_key(tool))
        return
    count = redis.incr(key)
    if count == 1:  # the window starts at the first failure (Redis 6: no EXPIRE NX)
        redis.expire(key, settings.TOOL_CIRCUIT_WINDOW_S)
    if count >= settings.TOOL_CIRCUIT_FAILURES:
        redis.set(_open_key(tool), cause[:300] or "-", ex=settings.TOOL_CIRCUIT_COOLDOWN_S)
        redis.delete(key)


@dataclass(frozen=True)
class OpenCircuit:
    tool: str
    retry_after_s: int
    cause: str  # the failure that opened it, as the tool reported it ("" when not known)


def circuits_open() -> list[OpenCircuit]:
    """Every tool whose calls are refused right now (for operators)."""
    redis = get_redis()
    found = []
    for key in redis.scan_iter(match=f"{_PREFIX}:open:*", count=100):
        name = key.decode() if isinstance(key, bytes) else key
        ttl, cause = redis.ttl(name), redis.get(name)
        if ttl and ttl > 0:
            text = cause.decode() if isinstance(cause, bytes) else str(cause or "")
            found.append(OpenCircuit(name.rsplit(":", 1)[-1], int(ttl), text.strip("-")))
    return sorted(found, key=lambda c: c.tool)
