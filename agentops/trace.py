"""Trace events: appended in the caller's transaction, numbered per run."""

from __future__ import annotations

from typing import Any

from django.db import connection

from agentops.models import Action, AgentRun, TraceEvent


def trace_append(
    *, run: AgentRun, kind: str, payload: dict[str, Any] | None = None, action: Action | None = None
) -> TraceEvent:
    """Append one event. Locks the run row until the caller's transaction ends (numbering)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agentops_agentrun SET event_seq = event_seq + 1 WHERE id = %s RETURNING event_seq",
            [run.pk],
        )
        (seq,) = cursor.fetchone()
    run.event_seq = seq
    return TraceEvent.objects.create(
        run=run, seq=seq, kind=kind, action=action, payload=payload or {}
    )
