"""Trace events: appended in the caller's transaction, numbered per run, and pushed to the
run's Channels group after commit. The push is a fast path only: the database is the record, and
a consumer that (re)connects reads what it missed from there."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import threading
from typing import Any

from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from agentops.models import Action, AgentRun, TraceEvent
from agentops.runtime.redis_client import get_redis
from agentops.runtime.store import insert_statement, inserted, set_items, update_statement

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


WATCH_TTL_S = 86400  # as the channel layer's group membership: a watcher that died unannounced
PUSH_TIMEOUT_S = 10  # one batch of pushes, at most (the channel layer's socket timeout)


def _watch_key(group: str) -> str:
    return f"agentops:watchers:{group}"


def watch(group: str, channel: str) -> None:
    """Mark the group watched by ``channel`` (the live consumer, before it joins the group and
    reads what it missed from the database): from now on its events are pushed."""
    key = _watch_key(group)
    get_redis().pipeline(transaction=False).sadd(key, channel).expire(key, WATCH_TTL_S).execute()


def unwatch(group: str, channel: str) -> None:
    get_redis().srem(_watch_key(group), channel)


class _Pusher:
    """One thread per process that sends the pushes in the background, so that a commit never
    waits for Redis; the channel layer's connections live on that thread's one event loop (a
    fresh loop per push would open a new connection every time). Started lazily, again after
    a fork.

    A group's events are pushed only while someone watches it (watch): the check is one
    Redis command for all the groups queued, where a push to an empty group cost the channel
    layer's two commands and a turn of the event loop (12% of the worker's CPU in a py-spy
    profile of 16-run batches, ~0.35 ms per commit; bench/README.md, "Fewer round trips per
    run"). No event is missed: a watcher marks the group before it joins it and reads the
    database, and the check follows the event's commit, so an event either was committed before
    that read or finds the mark. Events queued for one group before the thread gets to them go
    out as one message (the events of a transaction are queued back to back by its on_commit
    callbacks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[str, dict[str, Any]]] | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def send(self, group: str, event: dict[str, Any]) -> None:
        with self._lock:
            if self._queue is None or self._pid != os.getpid():
                self._queue, self._pid = queue.SimpleQueue(), os.getpid()
            if self._thread is None or not self._thread.is_alive():  # a fork, or it died
                self._thread = threading.Thread(
                    target=self._run, args=(self._queue,), name="trace-push", daemon=True
                )
                self._thread.start()
            pushes = self._queue
        pushes.put((group, event))

    def _run(self, pushes: queue.SimpleQueue[tuple[str, dict[str, Any]]]) -> None:
        loop = asyncio.new_event_loop()
        while True:
            batches: dict[str, list[dict[str, Any]]] = {}
            group, event = pushes.get()
            while True:
                batches.setdefault(group, []).append(event)
                try:
                    group, event = pushes.get_nowait()
                except queue.Empty:
                    break
            try:
                watched = _watched(batches)
                if watched:  # bounded: a stalled Redis holds up the pushes no longer
                    loop.run_until_complete(asyncio.wait_for(_push(watched), PUSH_TIMEOUT_S))
            except Exception:  # the stream is lossy by design; readers catch up
                log.warning("could not push trace events", exc_info=True)


def _watched(batches: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The batches of the groups someone watches, in one round trip."""
    with get_redis().pipeline(transaction=False) as pipe:
        for group in batches:
            pipe.exists(_watch_key(group))
        seen = pipe.execute()
    return {g: events for (g, events), yes in zip(batches.items(), seen, strict=True) if yes}


async def _push(batches: dict[str, list[dict[str, Any]]]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    sends = [
        layer.group_send(group, {"type": "trace.batch", "events": events})
        for group, events in batches.items()
    ]
    for failed in await asyncio.gather(*sends, return_exceptions=True):
        if isinstance(failed, Exception):
            log.warning("could not push trace events", exc_info=failed)


_pusher = _Pusher()

# One statement per event: number it under the run's row lock and insert it. (Two statements
# through the ORM cost a round trip more for each of the ~12 events of a run; figure in
# bench/README.md, "trace events".)
# What changed with the event goes in the same statement: the run's own columns (a status move,
# a counter: ``run_fields``), and the event's action, a new one inserted (``action_insert``) or
# a move of it saved (``action_fields``; runtime.transitions): one round trip, not two.
_APPEND_SQL = """
WITH {action}numbered AS (
    UPDATE agentops_agentrun SET event_seq = event_seq + 1{sets} WHERE id = %s RETURNING event_seq
)
INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
SELECT %s, numbered.event_seq, %s, %s, %s::jsonb, %s FROM numbered
RETURNING id, seq
"""
# A new run and its first event (run_insert).
_FIRST_SQL = """
WITH created AS ({run})
INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
VALUES (%s, 1, %s, %s, %s::jsonb, %s)
RETURNING id, seq
"""


def trace_append(
    *,
    run: AgentRun,
    kind: str,
    payload: dict[str, Any] | None = None,
    action: Action | None = None,
    run_fields: tuple[str, ...] = (),
    action_fields: tuple[str, ...] = (),
    action_insert: bool = False,
    run_insert: bool = False,
) -> TraceEvent:
    """Append one event, saving in the same statement ``run_fields`` of ``run`` and either
    ``action_fields`` of ``action`` or, with ``action_insert``, the new ``action`` itself (a
    change and its event are one write); with ``run_insert``, the new ``run`` is inserted with
    this, its first event. Locks the run row until the caller's transaction ends (numbering);
    pushes the event to the run's group after commit."""
    event = TraceEvent(
        run=run,
        kind=kind,
        action=action,
        payload=payload or {},
        created_at=timezone.now(),
    )
    event_params = [
        run.pk,
        kind,
        action.pk if action is not None else None,
        json.dumps(event.payload),
        event.created_at,
    ]
    if run_insert:
        if action is not None or run_fields:
            raise ValueError("a new run's first event saves nothing else")
        run.event_seq = 1
        sql, params = insert_statement(run)
        statement, params = _FIRST_SQL.format(run=sql), [*params, *event_params]
    else:
        items, values = set_items(run, (*run_fields, "updated_at")) if run_fields else ([], [])
        saved, saved_params = "", []
        if action is not None and (action_insert or action_fields):
            sql, saved_params = (
                insert_statement(action)
                if action_insert
                else update_statement(action, action_fields)
            )
            saved = f"saved AS ({sql}), "
        statement = _APPEND_SQL.format(action=saved, sets="".join(f", {i}" for i in items))
        params = [*saved_params, *values, run.pk, *event_params]
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        event.pk, event.seq = cursor.fetchone()
    if run_insert:
        inserted(run)
    if action_insert:
        inserted(action)
    run.event_seq = event.seq
    message = event_json(event)
    group = run_group(run.pk)
    transaction.on_commit(lambda: _pusher.send(group, message))
    return event
