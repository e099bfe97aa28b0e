"""How runs look in JSON. Generic over tools: a run's confirmed writes are its receipts."""

from __future__ import annotations

from typing import Any

from agentops.selectors import RunDetail


def run_as_json(run: RunDetail) -> dict[str, Any]:
    return {
        "run_id": str(run.run_id),
        "kind": run.kind,
        "status": run.status,
        "outcome": run.outcome,
        "reply": run.reply,
        "goal": run.goal,
        "conversation_id": str(run.conversation_id) if run.conversation_id else None,
        "delegation": run.delegation,
        "turn": run.turn,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "events": run.events,
        "receipts": run.receipts,
    }
