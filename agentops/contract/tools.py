"""What every tool declares: description, schemas, metadata, and for writes the adapter side of
seed 002 (receipt lookup by key, verification, optional compensation)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


# What an answer may weigh unless a tool declares otherwise: what a model's context takes of one
# tool result (agentops.planners cuts longer ones), and what the runtime cuts to.
DEFAULT_OUTPUT_BYTES = 4096


@dataclass(frozen=True)
class ToolMeta:
    """What the runtime reads instead of guessing from the description."""

    readonly: bool
    side_effect: SideEffect
    enforced_idempotent: bool
    estimated_latency_ms: int
    roles: frozenset[str]
    max_output_bytes: int = DEFAULT_OUTPUT_BYTES
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
class Message:
    """Something said to a person, stored as an English msgid with its parameters and rendered
    in the reader's language at display time (the domain marks ``msgid`` with gettext_noop).

    A parameter is a plain value, or a tagged one the renderer formats for the reader:
    ``{"span": [start_iso, end_iso]}`` (weekday, date and time range), ``{"at": iso}``,
    ``{"department": code}`` or a nested message ``{"msgid": ..., "params": ...}``."""

    msgid: str
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def text(self) -> str:
        """The English text (for the model, the API's envelopes and logs)."""
        return message_text(self.as_json())

    def as_json(self) -> dict[str, Any]:
        return {"msgid": self.msgid, "params": dict(self.params)}


def message_text(value: Any) -> str:
    """English text of a stored message (``{"msgid", "params"}``), a Message or a plain string
    (rows recorded before messages were stored as ids)."""
    if isinstance(value, Message):
        value = value.as_json()
    if not isinstance(value, dict) or "msgid" not in value:
        return "" if value is None else str(value)
    params = {k: _param_text(v) for k, v in (value.get("params") or {}).items()}
    try:
        return str(value["msgid"]) % params if params else str(value["msgid"])
    except (KeyError, TypeError, ValueError):
        return str(value["msgid"])


def _param_text(value: Any) -> Any:
    if isinstance(value, dict):
        if "span" in value:
            start, end = [*list(value["span"]), "", ""][:2]
            return f"{start} to {end}"
        if "at" in value:
            return str(value["at"])
        if "department" in value:
            return str(value["department"])
        if "msgid" in value:
            return message_text(value)
    return value


def message_json(value: Message | str) -> dict[str, Any] | str:
    """How a reason is stored: a Message as its id and parameters, a string as it is."""
    return value.as_json() if isinstance(value, Message) else value


@dataclass(frozen=True)
class Risk:
    level: SideEffect
    reasons: tuple[Message | str, ...] = ()


@dataclass(frozen=True)
class CallContext:
    """Who is calling and under which identifiers. The subject comes from the session or token,
    never from the model's arguments."""

    user: Any  # the authenticated user (the contract imports no Django)
    run_id: str = ""
    action_id: str = ""
    idempotency_key: str = ""
    delegation: Delegation = field(default_factory=Delegation)
    # The answer's size cap (the tool's ToolMeta.max_output_bytes, set by the runtime for each
    # call): a tool that pages fits its page to it (agentops.contract.paging), so the runtime
    # never cuts a page.
    max_output_bytes: int = DEFAULT_OUTPUT_BYTES


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
class ToolSpec[I: BaseModel]:
    """One tool, declared once. A write tool that lacks its receipt lookup or verifier cannot be
    declared: the runtime reconciles and verifies only through them. ``I`` is its input model:
    the handler, risk and version callbacks take the arguments as validated by it."""

    name: str
    description: ToolDescription
    input_model: type[I]
    output_model: type[BaseModel]
    meta: ToolMeta
    handler: Callable[[CallContext, I], dict[str, Any]]
    scope: ScopeFields = field(default_factory=ScopeFields)
    lookup_receipt: Callable[[str], ReceiptLookup] | None = None
    verify: Callable[[dict[str, Any], CallContext], Verification] | None = None
    compensate: Compensation | None = None  # the undo of a confirmed write, if one exists
    assess_risk: Callable[[CallContext, I], Risk] | None = None
    # The tool's own rules that no approval can change (a booking too long, in the past, a
    # repeat rule the product does not offer): the gate checks them before a human is asked,
    # so an approver never approves what would fail anyway. Raises ToolError; reads nothing
    # that changes (the schedule is the write's to check).
    validate: Callable[[CallContext, I], None] | None = None
    # The version of the state a call acts on (e.g. a room's schedule), bound into approvals.
    environment_version: Callable[[I], int | None] | None = None
    # The facts the risk policy read for this call (a room's approval flag, department,
    # capacity, bookable): bound into an approval, so an edit of any of them invalidates it.
    policy_facts: Callable[[I], dict[str, Any]] | None = None
    summarize: Callable[[dict[str, Any], str], str] | None = None  # (receipt, language) -> reply
    # For the approver: the call in a person's words (room name, weekday, date, time), and
    # what stands in its way now (slot taken, room changed, requester no longer allowed): an
    # empty tuple when the write can still succeed. ``not_done`` says what did not happen when
    # an approved call failed ("Nothing was booked.").
    describe: Callable[[CallContext, I], Message] | None = None
    recheck: Callable[[CallContext, I], tuple[Message, ...]] | None = None
    not_done: Message | None = None
    # When the call's effect begins (a booking's start): an approval is asked for until a set
    # time before it (runtime.approval.approval_deadline), not a fixed time from now.
    acts_at: Callable[[I], datetime | None] | None = None

    def __post_init__(self) -> None:
        if not self.meta.readonly and (self.lookup_receipt is None or self.verify is None):
            raise ValueError(f"write tool {self.name} must declare lookup_receipt and verify")
