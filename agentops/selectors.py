"""Runtime reads."""

from __future__ import annotations

from typing import Any

from agentops.models import AgentRun, TraceEvent
from agentops.trace import event_json


def run_get_for_user(*, run_id: Any, user: Any) -> AgentRun | None:
    """The user's own run; someone else's reads as absent."""
    return AgentRun.objects.filter(pk=run_id, subject=user).first()


def run_events_after(*, run_id: Any, after: int, limit: int = 500) -> list[dict[str, Any]]:
    """Events of a run after sequence number ``after``, in order (what a reconnecting reader missed)."""
    rows = TraceEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:limit]
    return [event_json(e) for e in rows]
