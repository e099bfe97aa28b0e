"""What one request allows a run to do: set by the host from the user's words, never by a model.

A domain app reads a request into a Delegation (its Assistant hook); an explicit scope can only
narrow it. Tools say which of their arguments each field constrains (ScopeFields), so the gate
and the verifier enforce every field without knowing the domain.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any


class ScopeError(ValueError):
    """A scope that would widen the delegation, or contradicts it."""


@dataclass(frozen=True)
class ScopeFields:
    """Which argument of a tool each delegation field constrains (None: not constrained)."""

    window: tuple[str, str] | None = None  # (start, end) argument names
    attendees: str | None = None
    equipment: str | None = None
    resource: str | None = None  # the named thing, e.g. a room code


@dataclass(frozen=True)
class Delegation:
    tools: frozenset[str] = frozenset()
    max_writes: int = 0
    window: tuple[datetime, datetime] | None = None
    attendees: int | None = None
    equipment: frozenset[str] = frozenset()
    resource: str | None = None
    # Several named things, one write each (a multi-room request): a write may name any of them.
    resources: frozenset[str] = frozenset()

    @property
    def allowed_resources(self) -> frozenset[str]:
        """The things a write may name; empty: any."""
        if self.resource is not None:
            return frozenset({self.resource})
        return self.resources

    def __post_init__(self) -> None:
        if self.window is not None:
            start, end = self.window
            if start.tzinfo is None or end.tzinfo is None:
                raise ScopeError("the window must carry a UTC offset")
            if end <= start:
                raise ScopeError("the window must end after it starts")
        if self.max_writes < 0:
            raise ScopeError("max_writes cannot be negative")

    def narrow(
        self,
        *,
        tools: frozenset[str] | None = None,
        max_writes: int | None = None,
        window: tuple[datetime, datetime] | None = None,
        attendees: int | None = None,
        equipment: frozenset[str] = frozenset(),
        resource: str | None = None,
    ) -> Delegation:
        """This delegation, narrowed by an explicit scope. A scope never widens it: tools are
        intersected, writes take the smaller allowance, windows intersect, equipment adds up;
        a scope that names other people or another resource than the request did is refused."""
        narrowed = self
        if tools is not None:
            narrowed = replace(narrowed, tools=self.tools & tools)
        if max_writes is not None:
            narrowed = replace(narrowed, max_writes=min(self.max_writes, max_writes))
        if window is not None:
            if self.window is not None:
                start, end = max(self.window[0], window[0]), min(self.window[1], window[1])
                if end <= start:
                    raise ScopeError("the scope's window lies outside the request's")
                window = (start, end)
            narrowed = replace(narrowed, window=window)
        if attendees is not None:
            if self.attendees is not None and attendees != self.attendees:
                raise ScopeError(f"the request is for {self.attendees} people")
            narrowed = replace(narrowed, attendees=attendees)
        if resource is not None:
            allowed = self.allowed_resources
            if allowed and resource not in allowed:
                raise ScopeError(f"the request names {', '.join(sorted(allowed))}")
            narrowed = replace(narrowed, resource=resource, resources=frozenset())
        return replace(narrowed, equipment=self.equipment | equipment)

    def to_json(self) -> dict[str, Any]:
        return {
            "tools": sorted(self.tools),
            "max_writes": self.max_writes,
            "window": [w.isoformat() for w in self.window] if self.window else None,
            "attendees": self.attendees,
            "equipment": sorted(self.equipment),
            "resource": self.resource,
            "resources": sorted(self.resources),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Delegation:
        window = data.get("window")
        return cls(
            tools=frozenset(data.get("tools") or ()),
            max_writes=int(data.get("max_writes") or 0),
            window=(
                (datetime.fromisoformat(window[0]), datetime.fromisoformat(window[1]))
                if window
                else None
            ),
            attendees=data.get("attendees"),
            equipment=frozenset(data.get("equipment") or ()),
            resource=data.get("resource"),
            resources=frozenset(data.get("resources") or ()),
        )


@dataclass(frozen=True)
class RequestReading:
    """The host's reading of one request: what the run may do, and in which language to answer."""

    delegation: Delegation
    language: str
    understood: dict[str, Any] = field(default_factory=dict)  # shown to the user, traced
