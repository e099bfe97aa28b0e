"""Runtime reads."""

from __future__ import annotations

from typing import Any

from agentops.models import ActionStatus, AgentRun


def run_get_for_user(*, run_id: Any, user: Any) -> AgentRun | None:
    """The user's own run; someone else's reads as absent."""
    return AgentRun.objects.filter(pk=run_id, subject=user).first()


def run_as_json(run: AgentRun) -> dict[str, Any]:
    events = [
        {
            "seq": e.seq,
            "kind": e.kind,
            "at": e.created_at.isoformat(),
            "action_id": str(e.action_id or ""),
            "payload": e.payload,
        }
        for e in run.events.order_by("seq")
    ]
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
