"""The tool contract: what every tool declares, and the envelope every call returns.

Dependency-free on purpose (pydantic and the standard library only): domain apps declare their
tools against this module and import nothing else of the runtime.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel


class SideEffect(StrEnum):
    LOW = "LOW"  # safe, no approval
    MEDIUM = "MEDIUM"  # ordinary write, audited
    HIGH = "HIGH"  # waits for a human approval


RISK_ORDER = {SideEffect.LOW: 0, SideEffect.MEDIUM: 1, SideEffect.HIGH: 2}


class Signal(StrEnum):
    GREEN = "green"  # success
    RED = "red"  # permanent: never retried
    YELLOW = "yellow"  # transient: bounded backoff retries


RED_REASONS = frozenset(
    {
        "invalid_input",
        "forbidden",
        "not_found",
        "conflict",
        "idempotency_key_reuse",
        "out_of_scope",
        "unknown_tool",
        "budget_exhausted",
        "loop_detected",
        "run_terminal",
        "output_too_large",
    }
)
YELLOW_REASONS = frozenset({"timeout", "unavailable", "rate_limited", "in_progress"})
UNKNOWN_OUTCOME = "unknown_outcome"  # its own state: reconciled, never plainly retried


class ToolError(Exception):
    """A refusal or failure a tool (or the runtime) reports to the model as an envelope."""

    def __init__(
        self,
        reason: str,
        code: str,
        message: str,
        hint: str = "",
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(message)
        self.reason, self.code, self.message = reason, code, message
        self.hint, self.retry_after_ms = hint, retry_after_ms

    @property
    def signal(self) -> Signal:
        return Signal.YELLOW if self.reason in YELLOW_REASONS else Signal.RED

    def envelope(self) -> dict[str, Any]:
        return failure(self.reason, self.code, self.message, self.hint, self.retry_after_ms)


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
    reason: str, code: str, message: str, hint: str = "", retry_after_ms: int | None = None
) -> dict[str, Any]:
    if reason == UNKNOWN_OUTCOME:
        signal = UNKNOWN_OUTCOME
    else:
        signal = (Signal.YELLOW if reason in YELLOW_REASONS else Signal.RED).value
    return {
        "ok": False,
        "signal": signal,
        "reason": reason,
        "code": code,
        "message": message,
        "hint": hint,
        "retry_after_ms": retry_after_ms,
    }


@dataclass(frozen=True)
class ToolMeta:
    """What the runtime reads instead of guessing from the description."""

    readonly: bool
    side_effect: SideEffect
    enforced_idempotent: bool
    estimated_latency_ms: int
    roles: frozenset[str]
    max_output_bytes: int = 4096

    @property
    def timeout_s(self) -> float:
        return 3 * self.estimated_latency_ms / 1000


@dataclass(frozen=True)
class ToolDescription:
    """The six parts a model needs to choose a tool well."""

    summary: str
    when_to_use: str
    differs_from: str
    parameters: str
    constraints: str
    example: str

    def render(self) -> str:
        return (
            f"{self.summary}\n"
            f"[When to use] {self.when_to_use}\n"
            f"[Not the same as] {self.differs_from}\n"
            f"[Parameters] {self.parameters}\n"
            f"[Constraints and side effects] {self.constraints}\n"
            f"[Example] {self.example}"
        )


class ReceiptStatus(StrEnum):
    FOUND = "found"
    ABSENT = "absent"  # proven: nothing was written under this key
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ReceiptLookup:
    status: ReceiptStatus
    receipt: dict[str, Any] | None = None
    detail: str = ""


@dataclass(frozen=True)
class Verification:
    holds: bool
    detail: str = ""


@dataclass(frozen=True)
class Risk:
    level: SideEffect
    reasons: tuple[str, ...] = ()


@dataclass
class CallContext:
    """Who is calling and under which identifiers. The subject comes from the session or token."""

    user: Any
    run_id: str = ""
    action_id: str = ""
    idempotency_key: str = ""
    delegation: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[CallContext, BaseModel], Any]


@dataclass(frozen=True)
class ToolSpec:
    """One tool, declared once. Write tools also declare the reconciliation side (seed 002)."""

    name: str
    description: ToolDescription
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    meta: ToolMeta
    handler: Handler
    lookup_receipt: Callable[[str], ReceiptLookup] | None = None
    verify: Callable[[dict[str, Any], CallContext], Verification] | None = None
    compensate: Callable[[dict[str, Any], CallContext], Any] | None = None
    assess_risk: Callable[[CallContext, BaseModel], Risk] | None = None
    summarize: Callable[[dict[str, Any], str], str] | None = (
        None  # (receipt, language) -> reply text
    )

    def __post_init__(self) -> None:
        if not self.meta.readonly and (self.lookup_receipt is None or self.verify is None):
            raise ValueError(f"write tool {self.name} must declare lookup_receipt and verify")


def canonical_json(value: Any) -> str:
    """A stable text form for digests: sorted keys, no spaces, ISO datetimes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
