"""Trace events: appended in the caller's transaction, numbered per run, and pushed to the
run's Channels group after commit. The push is a fast path only: the database is the record, and
a consumer that (re)connects reads what it missed from there."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from typing import Any

from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from agentops.models import Action, AgentRun, TraceEvent
from agentops.rows import set_items

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


class _Pusher:
    """One event loop thread per process that sends pushes in the background, so that a commit
    never waits for Redis and the channel layer keeps one connection pool (a fresh loop per push
    would open a new connection every time). Started lazily, again after a fork.

    Events queued for one group before the loop gets to them go out as one message: the events
    of a transaction are queued back to back by its on_commit callbacks, so a commit costs one
    group_send per run, not one per event."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self._pending: dict[str, list[dict[str, Any]]] = {}

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                self._pending = {}
                threading.Thread(
                    target=self._loop.run_forever, name="trace-push", daemon=True
                ).start()
            return self._loop

    def send(self, group: str, event: dict[str, Any]) -> None:
        loop = self.loop()
        with self._lock:
            queued = self._pending.setdefault(group, [])
            queued.append(event)
            first = len(queued) == 1
        if first:
            loop.call_soon_threadsafe(self._flush, group)

    def _flush(self, group: str) -> None:
        with self._lock:
            events = self._pending.pop(group, [])
        layer = get_channel_layer()
        if layer is None or not events:
            return
        message = {"type": "trace.batch", "events": events}
        task = asyncio.ensure_future(layer.group_send(group, message))
        task.add_done_callback(_log_failure)


def _log_failure(future: asyncio.Future) -> None:
    if future.exception() is not None:  # the stream is lossy by design; readers catch up
        log.warning("could not push trace events", exc_info=future.exception())


_pusher = _Pusher()

# One statement per event: number it under the run's row lock and insert it. (Two statements
# through the ORM cost a round trip more for each of the ~12 events of a run; figure in
# bench/README.md, "trace events".)
# The run's own columns that changed with the event (a status move, a counter) go in the same
# UPDATE: ``run_fields``.
_APPEND_SQL = """
WITH numbered AS (
    UPDATE agentops_agentrun SET event_seq = event_seq + 1{sets} WHERE id = %s RETURNING event_seq
)
INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
SELECT %s, numbered.event_seq, %s, %s, %s::jsonb, %s FROM numbered
RETURNING id, seq
"""


def trace_append(
    *,
    run: AgentRun,
    kind: str,
    payload: dict[str, Any] | None = None,
    action: Action | None = None,
    run_fields: tuple[str, ...] = (),
) -> TraceEvent:
    """Append one event, saving ``run_fields`` of ``run`` in the same statement (a change of
    the run and its event are one write). Locks the run row until the caller's transaction
    ends (numbering); pushes it to the run's group after commit."""
    event = TraceEvent(
        run=run,
        kind=kind,
        action=action,
        payload=payload or {},
        created_at=timezone.now(),
    )
    items, values = set_items(run, (*run_fields, "updated_at")) if run_fields else ([], [])
    sets = "".join(f", {item}" for item in items)
    with connection.cursor() as cursor:
        cursor.execute(
            _APPEND_SQL.format(sets=sets),
            [
                *values,
                run.pk,
                run.pk,
                kind,
                action.pk if action is not None else None,
                json.dumps(event.payload),
                event.created_at,
            ],
        )
        event.pk, event.seq = cursor.fetchone()
    run.event_seq = event.seq
    message = event_json(event)
    group = run_group(run.pk)
    transaction.on_commit(lambda: _pusher.send(group, message))
    return event
