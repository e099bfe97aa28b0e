"""Trace events: appended in the caller's transaction, numbered per run, and pushed to the
run's Channels group after commit. The push is a fast path only: the database is the record, and
a consumer that (re)connects reads what it missed from there."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction

from agentops.models import Action, AgentRun, TraceEvent

log = logging.getLogger(__name__)


def run_group(run_id: Any) -> str:
    return f"run.{run_id}"


def event_json(event: TraceEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "kind": event.kind,
        "at": event.created_at.isoformat(),
        "action_id": str(event.action_id or ""),
        "payload": event.payload,
    }


def _push(run_id: Any, message: dict[str, Any]) -> None:
    try:
        async_to_sync(get_channel_layer().group_send)(
            run_group(run_id), {"type": "trace.event", "event": message}
        )
    except Exception:  # the stream is lossy by design; readers catch up from the database
        log.warning("could not push trace event of run %s", run_id, exc_info=True)


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
    event = TraceEvent.objects.create(
        run=run, seq=seq, kind=kind, action=action, payload=payload or {}
    )
    message = event_json(event)
    transaction.on_commit(lambda: _push(run.pk, message))
    return event
