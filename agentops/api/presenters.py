"""How runs look in JSON. Generic over tools: a run's confirmed writes are its receipts."""

from __future__ import annotations

from typing import Any

from agentops.models import ActionStatus, AgentRun
from agentops.trace import event_json


def run_as_json(run: AgentRun) -> dict[str, Any]:
    events = [event_json(e) for e in run.events.order_by("seq")]
    writes = run.actions.filter(readonly=False, status=ActionStatus.SUCCEEDED).order_by(
        "turn", "call_index"
    )
    receipts = [
        {"tool": a.tool, "receipt": a.result["data"]}
        for a in writes
        if a.result and a.result.get("data")
    ]
    return {
        "run_id": str(run.pk),
        "kind": run.kind,
        "status": run.status,
        "outcome": run.outcome,
        "reply": run.reply,
        "goal": run.goal,
        "delegation": run.delegation,
        "turn": run.turn,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "events": events,
        "receipts": receipts,
    }
