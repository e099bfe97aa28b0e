"""What a model sees and what it may say back. A model only proposes; the runtime decides."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Proposal:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Step:
    """Either tool proposals, or (with none) a final message and how the model sees the end."""

    proposals: list[Proposal] = field(default_factory=list)
    message: str = ""
    outcome: str = "done"  # done | gave_up | ask_user (only read when there are no proposals)


@dataclass(frozen=True)
class Observation:
    """One earlier call of this run and the envelope it produced (refusals included)."""

    turn: int
    tool: str
    arguments: dict[str, Any]
    result: dict[str, Any]


@dataclass(frozen=True)
class ModelContext:
    """A small view built per step: never the audit log, never credentials."""

    goal: str
    language: str
    now: str
    subject: dict[str, str]
    delegation: dict[str, Any]
    tools: list[dict[str, Any]]
    history: list[Observation]
    turn: int


class Planner(Protocol):
    name: str

    def propose(self, ctx: ModelContext) -> Step: ...
