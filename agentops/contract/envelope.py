"""The result envelope every call returns, and the protocol values in it (enums, once)."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Any


class Signal(StrEnum):
    """How a call ended: what the runtime does next depends only on this."""

    GREEN = "green"  # success
    RED = "red"  # permanent: never retried
    YELLOW = "yellow"  # transient: bounded backoff retries
    UNKNOWN = "unknown_outcome"  # a write may or may not have happened: reconciled, never retried


class Reason(StrEnum):
    """Why a call did not succeed. Each reason has exactly one signal."""

    # red: permanent
    INVALID_INPUT = "invalid_input"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    IDEMPOTENCY_KEY_REUSE = "idempotency_key_reuse"
    OUT_OF_SCOPE = "out_of_scope"
    UNKNOWN_TOOL = "unknown_tool"
    BUDGET_EXHAUSTED = "budget_exhausted"
    LOOP_DETECTED = "loop_detected"
    RUN_TERMINAL = "run_terminal"
    OUTPUT_TOO_LARGE = "output_too_large"
    OUTPUT_INVALID = "output_invalid"  # the tool answered outside its own output model
    EXPIRED = "expired"
    # yellow: transient
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    RATE_LIMITED = "rate_limited"
    IN_PROGRESS = "in_progress"
    # its own state
    UNKNOWN_OUTCOME = "unknown_outcome"

    @property
    def signal(self) -> Signal:
        if self is Reason.UNKNOWN_OUTCOME:
            return Signal.UNKNOWN
        if self in _TRANSIENT:
            return Signal.YELLOW
        return Signal.RED


_TRANSIENT = frozenset(
    {Reason.TIMEOUT, Reason.UNAVAILABLE, Reason.RATE_LIMITED, Reason.IN_PROGRESS}
)


class LostReceiptError(Exception):
    """A tool raises it when its request may have been applied but the answer was lost on the
    way back (the write committed, then the response vanished). The runtime takes the call for
    ``unknown_outcome`` and reconciles it by its key: never a plain retry."""


class ToolError(Exception):
    """A refusal or failure a tool (or the runtime) reports to the model as an envelope."""

    def __init__(
        self,
        reason: Reason | str,
        code: str,
        message: str,
        hint: str = "",
        retry_after_ms: int | None = None,
        *,
        detail: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = Reason(reason)
        self.code, self.message = code, message
        self.hint, self.retry_after_ms = hint, retry_after_ms
        self.detail = detail

    @property
    def signal(self) -> Signal:
        return self.reason.signal

    def envelope(self) -> dict[str, Any]:
        envelope = failure(self.reason, self.code, self.message, self.hint, self.retry_after_ms)
        if self.detail is not None:  # the domain's own, JSON-safe: e.g. its msgid and params
            envelope["detail"] = self.detail
        return envelope


def success(
    data: Any, *, next_cursor: str | None = None, observed_at: datetime | None = None
) -> dict[str, Any]:
    return {
        "ok": True,
        "signal": Signal.GREEN.value,
        "data": data,
        "next_cursor": next_cursor,
        "observed_at": observed_at.isoformat() if observed_at else None,
    }


def failure(
    reason: Reason | str,
    code: str,
    message: str,
    hint: str = "",
    retry_after_ms: int | None = None,
) -> dict[str, Any]:
    reason = Reason(reason)
    return {
        "ok": False,
        "signal": reason.signal.value,
        "reason": reason.value,
        "code": code,
        "message": message,
        "hint": hint,
        "retry_after_ms": retry_after_ms,
    }


def canonical_json(value: Any) -> str:
    """A stable text form for digests: sorted keys, no spaces, ISO datetimes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
