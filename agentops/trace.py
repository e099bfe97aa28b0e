"""Trace events: appended in the caller's transaction, numbered per run, and pushed to the
run's Channels group after commit. The push is a fast path only: the database is the record, and
a consumer that (re)connects reads what it missed from there."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from typing import Any

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


class _Pusher:
    """One event loop thread per process that sends pushes in the background, so that a commit
    never waits for Redis and the channel layer keeps one connection pool (a fresh loop per push
    would open a new connection every time). Started lazily, again after a fork."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                threading.Thread(
                    target=self._loop.run_forever, name="trace-push", daemon=True
                ).start()
            return self._loop

    def send(self, group: str, message: dict[str, Any]) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), self.loop())
        future.add_done_callback(_log_failure)


def _log_failure(future: concurrent.futures.Future) -> None:
    if future.exception() is not None:  # the stream is lossy by design; readers catch up
        log.warning("could not push a trace event", exc_info=future.exception())


_pusher = _Pusher()


def _push(run_id: Any, message: dict[str, Any]) -> None:
    _pusher.send(run_group(run_id), {"type": "trace.event", "event": message})


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
