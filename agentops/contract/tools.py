"""What every tool declares: description, schemas, metadata, and for writes the adapter side of
seed 002 (receipt lookup by key, verification, optional compensation)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from agentops.contract.delegation import Delegation, ScopeFields


class SideEffect(StrEnum):
    LOW = "LOW"  # safe, no approval
    MEDIUM = "MEDIUM"  # ordinary write, audited
    HIGH = "HIGH"  # waits for a human approval

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {SideEffect.LOW: 0, SideEffect.MEDIUM: 1, SideEffect.HIGH: 2}


@dataclass(frozen=True)
class ToolMeta:
    """What the runtime reads instead of guessing from the description."""

    readonly: bool
    side_effect: SideEffect
    enforced_idempotent: bool
    estimated_latency_ms: int
    roles: frozenset[str]
    max_output_bytes: int = 4096
    open_world: bool = False  # it reaches beyond this system (a third-party MCP server's tool)

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


@dataclass(frozen=True)
class CallContext:
    """Who is calling and under which identifiers. The subject comes from the session or token,
    never from the model's arguments."""

    user: Any  # the authenticated user (the contract imports no Django)
    run_id: str = ""
    action_id: str = ""
    idempotency_key: str = ""
    delegation: Delegation = field(default_factory=Delegation)


Handler = Callable[[CallContext, BaseModel], dict[str, Any]]


@dataclass(frozen=True)
class Compensation:
    """How the runtime undoes a confirmed write of a tool (a saga step): by calling another
    declared write tool, through the same recorder, under the key ``<write's key>:compensate``.

    ``arguments`` builds that call's arguments from the write's receipt; ``label`` names what
    the write produced (e.g. a booking code) for the reply."""

    tool: str
    arguments: Callable[[dict[str, Any]], dict[str, Any]]
    label: Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class ToolSpec:
    """One tool, declared once. A write tool that lacks its receipt lookup or verifier cannot be
    declared: the runtime reconciles and verifies only through them."""

    name: str
    description: ToolDescription
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    meta: ToolMeta
    handler: Handler
    scope: ScopeFields = field(default_factory=ScopeFields)
    lookup_receipt: Callable[[str], ReceiptLookup] | None = None
    verify: Callable[[dict[str, Any], CallContext], Verification] | None = None
    compensate: Compensation | None = None  # the undo of a confirmed write, if one exists
    assess_risk: Callable[[CallContext, BaseModel], Risk] | None = None
    # The version of the state a call acts on (e.g. a room's schedule), bound into approvals.
    environment_version: Callable[[BaseModel], int | None] | None = None
    summarize: Callable[[dict[str, Any], str], str] | None = None  # (receipt, language) -> reply
    # When the call's effect begins (a booking's start): an approval is asked for until a set
    # time before it (runtime.approval.approval_deadline), not a fixed time from now.
    acts_at: Callable[[BaseModel], datetime | None] | None = None

    def __post_init__(self) -> None:
        if not self.meta.readonly and (self.lookup_receipt is None or self.verify is None):
            raise ValueError(f"write tool {self.name} must declare lookup_receipt and verify")
