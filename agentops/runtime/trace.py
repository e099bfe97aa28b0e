"""Trace events: appended in the caller's transaction, numbered per run, and pushed to the
run's Channels group after commit. The push is a fast path only: the database is the record, and
a consumer that (re)connects reads what it missed from there."""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from collections.abc import Sequence
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from agentops.models import Action, AgentRun, TraceEvent
from agentops.runtime import store
from agentops.runtime.redis_client import get_redis

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
    pipe = get_redis().pipeline(transaction=False)  # one statement each: redis-py's typing
    pipe.sadd(key, channel)
    pipe.expire(key, WATCH_TTL_S)
    pipe.execute()


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
        # (group, event) from send, or (_POKE, (group, message)) from poke: two shapes, told
        # apart by the first element, so the second is Any here and unpacked in _run.
        self._queue: queue.SimpleQueue[tuple[str, Any]] | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def send(self, group: str, event: dict[str, Any]) -> None:
        self._put((group, event))

    def poke(self, group: str, message: dict[str, Any]) -> None:
        """A screen's poke: sent, like events, only to a group someone watches (a screen's
        consumer marks its group with the contract's broadcast_listen, which is ``watch``).
        An empty group's poke cost the channel layer's commands and a turn of the event loop
        (~6% of the worker's CPU in a py-spy profile of 16-run batches: every reservation pokes
        its room's and day's schedule groups; bench/README.md, "what each change bought")."""
        self._put((_POKE, (group, message)))

    def _put(self, item: tuple[str, Any]) -> None:
        with self._lock:
            if self._queue is None or self._pid != os.getpid():
                self._queue, self._pid = queue.SimpleQueue(), os.getpid()
            if self._thread is None or not self._thread.is_alive():  # a fork, or it died
                self._thread = threading.Thread(
                    target=self._run, args=(self._queue,), name="trace-push", daemon=True
                )
                self._thread.start()
            pushes = self._queue
        pushes.put(item)

    def _run(self, pushes: queue.SimpleQueue[tuple[str, Any]]) -> None:
        loop = asyncio.new_event_loop()
        while True:
            batches: dict[str, list[dict[str, Any]]] = {}
            pokes: dict[str, dict[str, Any]] = {}  # the same poke twice is one
            group, event = pushes.get()
            while True:
                if group == _POKE:
                    target, message = event
                    pokes[target] = message
                else:
                    batches.setdefault(group, []).append(event)
                try:
                    group, event = pushes.get_nowait()
                except queue.Empty:
                    break
            try:
                watched = _watched(batches) if batches else {}
                heard = _watched(pokes) if pokes else {}
                if watched or heard:  # bounded: a stalled Redis holds up the pushes no longer
                    loop.run_until_complete(asyncio.wait_for(_push(watched, heard), PUSH_TIMEOUT_S))
            except Exception:  # the stream is lossy by design; readers catch up
                log.warning("could not push trace events", exc_info=True)


def _watched(batches: dict[str, Any]) -> dict[str, Any]:
    """The batches (or pokes) of the groups someone watches, in one round trip."""
    with get_redis().pipeline(transaction=False) as pipe:
        for group in batches:
            pipe.exists(_watch_key(group))
        seen = pipe.execute()
    return {g: events for (g, events), yes in zip(batches.items(), seen, strict=True) if yes}


async def _push(
    batches: dict[str, list[dict[str, Any]]], pokes: dict[str, dict[str, Any]] | None = None
) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    sends = [
        layer.group_send(group, {"type": "trace.batch", "events": events})
        for group, events in batches.items()
    ] + [layer.group_send(group, message) for group, message in (pokes or {}).items()]
    for failed in await asyncio.gather(*sends, return_exceptions=True):
        if isinstance(failed, Exception):
            log.warning("could not push trace events", exc_info=failed)


_POKE = "\x00poke"  # not a group name (channel layer names are printable): marks a poke
_pusher = _Pusher()


def broadcast(group: str, message: dict[str, Any]) -> None:
    """The contract's broadcaster (installed at start-up): a screen's poke, sent by the one
    pushing thread, never blocking the caller."""
    _pusher.poke(group, message)


def _event(
    run: AgentRun, kind: str, payload: dict[str, Any] | None, action: Action | None
) -> TraceEvent:
    return TraceEvent(
        run=run, kind=kind, action=action, payload=payload or {}, created_at=timezone.now()
    )


def _appended(run: AgentRun, event: TraceEvent) -> TraceEvent:
    """The event is in the caller's transaction: push it to the run's group after commit."""
    run.event_seq = event.seq
    message = event_json(event)
    group = run_group(run.pk)
    transaction.on_commit(lambda: _pusher.send(group, message))
    return event


# Each of these is one statement of agentops.runtime.store: the event numbered under the run's
# row lock (held until the caller's transaction ends) and inserted, with what changed with it.


def trace_append(
    *,
    run: AgentRun,
    kind: str,
    payload: dict[str, Any] | None = None,
    action: Action | None = None,
) -> TraceEvent:
    """Append one event of ``run`` (about ``action``, if given); push it after commit."""
    event = _event(run, kind, payload, action)
    store.event_append(event)
    return _appended(run, event)


def run_insert_with_event(
    *, run: AgentRun, kind: str, payload: dict[str, Any] | None = None
) -> TraceEvent:
    """Insert the new ``run`` with its first event; push the event after commit."""
    event = _event(run, kind, payload, None)
    store.run_insert_with_event(run, event)
    return _appended(run, event)


def run_save_with_event(
    *,
    run: AgentRun,
    fields: tuple[str, ...],
    kind: str,
    payload: dict[str, Any] | None = None,
    before: Sequence[TraceEvent] = (),
) -> TraceEvent:
    """Save ``fields`` of ``run`` (and its ``updated_at``) with one event of it; ``before``:
    events of the run not yet appended (``run_event``), numbered just before it, in order."""
    event = _event(run, kind, payload, None)
    if not before:
        store.run_save_with_event(run, fields, event)
        return _appended(run, event)
    store.run_save_with_events(run, fields, [*before, event])
    for earlier in before:
        _appended(run, earlier)
    return _appended(run, event)


def events_append(run: AgentRun, events: Sequence[TraceEvent]) -> None:
    """Append events made by ``run_event`` that no statement took, in order."""
    for event in events:
        store.event_append(event)
        _appended(run, event)


def run_event(
    run: AgentRun,
    kind: str,
    payload: dict[str, Any] | None = None,
    *,
    action: Action | None = None,
) -> TraceEvent:
    """An event of ``run`` (about ``action``, if given), not yet appended: it goes in with the
    next statement that takes it (action_insert_with_event's ``before``, which takes only
    events about no action; run_save_with_event's), or ``events_append``."""
    return _event(run, kind, payload, action)


def action_insert_with_event(
    *,
    run: AgentRun,
    action: Action,
    kind: str,
    payload: dict[str, Any] | None = None,
    run_fields: tuple[str, ...] = (),
    before: TraceEvent | None = None,
) -> TraceEvent:
    """Insert the new ``action`` with its event, saving ``run_fields`` of ``run`` (the caller's
    locked instance of the action's run) too; ``before``: an event of the run (run_event)
    appended just before the action's, in the same statement."""
    event = _event(run, kind, payload, action)
    store.action_insert_with_event(action, event, run=run, run_fields=run_fields, before=before)
    if before is not None:
        _appended(run, before)
    return _appended(run, event)


def action_save_with_event(
    *,
    run: AgentRun,
    action: Action,
    fields: tuple[str, ...],
    kind: str,
    payload: dict[str, Any] | None = None,
    run_fields: tuple[str, ...] = (),
) -> TraceEvent:
    """Save ``fields`` of ``action`` with its event, and ``run_fields`` of ``run`` (the caller's
    locked instance of the action's run) too."""
    event = _event(run, kind, payload, action)
    store.action_save_with_event(action, fields, event, run=run, run_fields=run_fields)
    return _appended(run, event)
