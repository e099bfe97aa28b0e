"""What a model sees, what it may say back, and the hook through which a domain app reads
requests, plans offline and words replies. A model only proposes; the runtime decides."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from agentops.contract.delegation import Delegation, RequestReading


class StepOutcome(StrEnum):
    """How a model sees the end of its work (read only when it proposes nothing)."""

    DONE = "done"
    GAVE_UP = "gave_up"
    ASK_USER = "ask_user"


@dataclass(frozen=True)
class Proposal:
    tool: str
    arguments: Any  # whatever the model sent: the gate validates it


@dataclass(frozen=True)
class Step:
    """Either tool proposals, or (with none) a final message and how the model sees the end."""

    proposals: list[Proposal] = field(default_factory=list)
    message: str = ""
    outcome: StepOutcome = StepOutcome.DONE


@dataclass(frozen=True)
class Observation:
    """One earlier call of this run and the envelope it produced (refusals included)."""

    turn: int
    tool: str
    arguments: dict[str, Any]
    result: dict[str, Any]


@dataclass(frozen=True)
class ConversationTurn:
    """An earlier turn of the same person's conversation, oldest first."""

    request: str  # what the person typed
    reply: str  # what the assistant answered
    understood: dict[str, Any]  # RequestReading.understood of that turn (JSON-able)
    outcome: str = ""  # the run's status then, in the runtime's words ("succeeded", "running")

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "reply": self.reply,
            "understood": self.understood,
            "outcome": self.outcome,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConversationTurn:
        return cls(
            request=str(data.get("request", "")),
            reply=str(data.get("reply", "")),
            understood=dict(data.get("understood") or {}),
            outcome=str(data.get("outcome", "")),
        )


@dataclass(frozen=True)
class ModelContext:
    """A small view built per step: never the audit log, never credentials."""

    goal: str
    language: str
    now: str
    subject: dict[str, str]
    delegation: Delegation
    tools: list[dict[str, Any]]
    history: list[Observation]
    turn: int
    # The domain's rules for a language model (its Assistant hook), after the runtime's own.
    instructions: tuple[str, ...] = ()
    # The earlier turns of the person's conversation, oldest first (the goal is the newest).
    conversation: tuple[ConversationTurn, ...] = ()


class Planner(Protocol):
    """A run's model. A planner may also say ``local = True``: it answers from the request and
    the history alone, in this process, in about a millisecond (no remote model, nothing it
    could wait on). The runtime then plans inside the transaction that claims the step's turn
    (agentops.runtime.steps.run_step), which any other planner must not hold while it thinks."""

    name: str

    def propose(self, ctx: ModelContext) -> Step: ...


class ReplyKind(StrEnum):
    """The replies the runtime needs worded; the domain words them."""

    NOTHING_DONE = "nothing_done"  # no write was confirmed; detail: what stood in the way
    STILL_CHECKING = "still_checking"  # a write's outcome is unknown
    STOPPED = "stopped"  # the run was stopped early; detail: the outcome
    CANCELLED = "cancelled"  # the requester cancelled; detail: what became of its writes
    APPROVAL_EXPIRED = "approval_expired"  # nobody decided in time; detail: what needed it
    RATE_LIMITED = "rate_limited"  # too many requests; detail: seconds to wait
    RELEASED = "released"  # a confirmed write was undone; detail: what it was (e.g. B204)
    STILL_HELD = "still_held"  # a confirmed write could not be undone; detail: what it is
    NONE_HELD = "none_held"  # a write in flight at a cancel turned out not to have happened


class Assistant(Protocol):
    """A domain app's side of the assistant, declared next to its tools (``tools.ASSISTANT``)."""

    def read_request(
        self,
        text: str,
        *,
        now: datetime,
        conversation: Sequence[ConversationTurn] = (),
        subject: Any = None,
    ) -> RequestReading:
        """The delegation this request grants, its language and what was understood, reading
        ``text`` as the latest turn of ``conversation`` (the earlier turns, oldest first): the
        delegation is rebuilt from the whole conversation. ``subject``: the person asking (from
        the session or token, never from a model), for a request about their own records
        ("move my 2pm"); None reads without them."""
        ...

    def planner(self) -> Planner:
        """The offline planner for this domain."""
        ...

    def reply(
        self,
        kind: ReplyKind,
        *,
        language: str,
        detail: str = "",
        writes: frozenset[str] = frozenset(),
    ) -> str:
        """A reply to the person, in their language. ``writes``: the write tools the request
        allowed (NOTHING_DONE says what was not done: a move that failed booked nothing new,
        it changed nothing)."""
        ...

    def language_of(self, text: str) -> str:
        """The language to answer ``text`` in, without reading it as a request (cheap: used
        to word a refusal before anything is read)."""
        ...

    def model_instructions(self) -> list[str]:
        """The domain's rules for a language model (added to the runtime's own)."""
        ...
