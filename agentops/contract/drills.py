"""Drills: a domain app's rehearsal of its trajectories in a sandbox of its own, run by the
runtime through the real worker (seed 000: "rehearse before going live").

The domain declares the sandbox (``tools.SANDBOX``): it prepares resources and identities that
normal use never sees, and for each drill says which runs to start (with which injected faults),
what happens while a held call waits, which database rows to show, and what must be true at the
end. The runtime starts the runs, waits for them, checks that each trace reconstructs, and shows
the result. Plain data both ways: the contract imports no Django.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class DrillRunPlan:
    """One run to start for a drill. ``hold_tool``: that tool's first call carries a ``pause``
    fault; the runtime waits until it is running, calls the drill's ``meanwhile``, then lets
    it go."""

    user: Any
    request: str
    faults: tuple[dict[str, Any], ...] = ()
    model: str | None = None
    script: tuple[dict[str, Any], ...] = ()
    hold_tool: str = ""


@dataclass(frozen=True)
class DrillCall:
    """One call of a finished run, as the drill's check sees it."""

    tool: str
    status: str
    attempts: int
    reason: str  # the envelope's reason when it failed, else ""
    idempotency_key: str
    data: dict[str, Any] | None  # the envelope's data when it succeeded


@dataclass(frozen=True)
class DrillOutcome:
    status: str
    outcome: str
    reply: str
    calls: list[DrillCall] = field(default_factory=list)
    event_kinds: list[str] = field(default_factory=list)


# The check: the outcomes of the drill's runs (in plan order) and its rows -> problems (empty:
# the drill passed). Messages are plain English for operators.
DrillCheck = Callable[[list[DrillOutcome], list[dict[str, Any]]], list[str]]


@dataclass(frozen=True)
class Drill:
    key: str
    title: str  # an English msgid; the screen translates it
    expectation: str  # what must hold at the end, an English msgid
    plans: tuple[DrillRunPlan, ...]
    rows: Callable[[], list[dict[str, Any]]]  # the drill's final database rows, as plain data
    check: DrillCheck
    meanwhile: Callable[[], None] | None = None


class Sandbox(Protocol):
    """A domain app's rehearsal ground (``tools.SANDBOX``)."""

    def prepare(self) -> None:
        """Create (or refresh) the sandbox's resources and identities and clear what earlier
        drills left in it. Touches nothing outside the sandbox."""
        ...

    def drills(self, *, now: datetime) -> list[Drill]:
        """The drills to run, in order, each with its own time window."""
        ...
