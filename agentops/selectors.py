"""Runtime reads."""

from __future__ import annotations

from typing import Any

from agentops.models import ActionStatus, AgentRun
from agentops.trace import event_json


def run_get_for_user(*, run_id: Any, user: Any) -> AgentRun | None:
    """The user's own run; someone else's reads as absent."""
    return AgentRun.objects.filter(pk=run_id, subject=user).first()


def run_as_json(run: AgentRun) -> dict[str, Any]:
    events = [event_json(e) for e in run.events.order_by("seq")]
    writes = run.actions.filter(readonly=False, status=ActionStatus.SUCCEEDED).order_by(
        "turn", "call_index"
    )
    bookings = [
        a.result["data"]
        for a in writes
        if a.tool == "reserve_room" and a.result and a.result.get("data")
    ]
    return {
        "run_id": str(run.pk),
        "status": run.status,
        "outcome": run.outcome,
        "reply": run.reply,
        "goal": run.goal,
        "delegation": run.delegation,
        "turn": run.turn,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "events": events,
        "bookings": bookings,
    }


def run_events_after(*, run_id: Any, after: int, limit: int = 500) -> list[dict[str, Any]]:
    """Events of a run after sequence number ``after``, in order (what a reconnecting reader missed)."""
    from agentops.models import TraceEvent

    rows = TraceEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:limit]
    return [event_json(e) for e in rows]
