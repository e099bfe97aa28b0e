"""Runs with writes are sagas (seed 001): each write is registered with its compensation before
it runs (``Action.compensation``, persisted with the pending intent); a run that cannot finish
undoes the writes it confirmed, last first, before it ends.

Compensations are ordinary actions of the run (``Action.compensates``): keyed
``<write's key>:compensate``, executed by the one recorder (idempotency claim, receipt lookup
when their outcome is unknown, trace events) and verified against the current environment. A
compensation that fails leaves the run ``rollback_pending`` with the evidence, for a human. The
reply is built from what the environment confirmed, never from what was intended.

Callers hold the run lock (runtime.locks) and are inside a transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from agentops.contract import ReceiptLookup, ReceiptStatus, ReplyKind, canonical_json, success
from agentops.models import (
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunOutcome,
    RunStatus,
)
from agentops.runtime import registry
from agentops.runtime.context import action_context
from agentops.runtime.idempotency import idempotency_complete, idempotency_release
from agentops.runtime.kinds import rules
from agentops.runtime.locks import lock_run
from agentops.runtime.proposals import call_digest
from agentops.runtime.queue import continue_action, enqueue_action
from agentops.runtime.trace import trace_append
from agentops.runtime.transitions import (
    action_create,
    action_move,
    actions_cancel_unstarted,
    run_move,
)

# A call whose outcome is not settled yet.
_IN_FLIGHT = frozenset({ActionStatus.RUNNING, ActionStatus.UNKNOWN_OUTCOME})
# A write the rollback waits for: it never undoes blind (seed 001: an unknown response is looked
# up first). One that needs a human waits for the operators' decision.
_UNSETTLED_WRITE = _IN_FLIGHT | {ActionStatus.NEEDS_HUMAN}
_UNDO_FAILED = frozenset(
    {
        ActionStatus.FAILED,
        ActionStatus.REJECTED,
        ActionStatus.NEEDS_HUMAN,
        ActionStatus.CANCELLED,
    }
)


def _writes(run: AgentRun) -> list[Action]:
    """The run's own writes (not its compensations), in the order they were proposed."""
    return list(
        run.actions.filter(readonly=False, compensates__isnull=True).order_by("turn", "call_index")
    )


def _undos(run: AgentRun) -> list[Action]:
    """The current compensation of each write being undone (a retried one supersedes the one
    that failed), in the order they run: last write first."""
    current: dict[Any, Action] = {}
    for undo in run.actions.filter(compensates__isnull=False).order_by("turn", "call_index"):
        current[undo.compensates_id] = undo
    return sorted(current.values(), key=lambda u: (u.turn, u.call_index))


def run_end(
    run: AgentRun,
    to: RunStatus,
    *,
    outcome: RunOutcome,
    reply: str,
    gone: Iterable[Any] = (),
) -> None:
    """End a run that did not succeed (``to`` failed or cancelled). A run holding confirmed
    writes with a registered compensation, or a write still in flight, goes ``compensating``
    first: it ends once the writes are settled and undone (or ``rollback_pending`` when an undo
    fails). Calls that have not started never will. ``gone``: ids of writes the verifier found
    no longer holding (the world undid them already): nothing of theirs is undone."""
    actions_cancel_unstarted(run)
    skip = {str(pk) for pk in gone}
    writes = _writes(run) if rules(run).compensates else []
    for write in writes:
        if str(write.pk) in skip and write.compensation:
            write.compensation |= {"skipped": "no longer holds"}  # nothing left to undo
            write.save(update_fields=["compensation"])
    to_undo = [w for w in writes if w.status == ActionStatus.SUCCEEDED and _undoable(w)]
    in_flight = [w for w in writes if w.status in _UNSETTLED_WRITE]
    if not to_undo and not in_flight:
        run_move(run, to, outcome=outcome, reply=reply)
        return
    run_move(
        run,
        RunStatus.COMPENSATING,
        outcome=outcome,
        reply=reply,
        payload={
            "outcome": outcome.value,
            "to_undo": [w.idempotency_key for w in to_undo],
            "in_flight": [w.idempotency_key for w in in_flight],
        },
    )
    saga_advance(run)


def _undoable(write: Action) -> bool:
    return bool(write.compensation) and not write.compensation.get("skipped")


def saga_advance(run: AgentRun) -> None:
    """Take the next step of a compensating run: wait for writes in flight, register the undo of
    every confirmed write (last first), run them one at a time, then end the run."""
    if run.status != RunStatus.COMPENSATING:
        return
    writes = _writes(run)
    if any(w.status in _UNSETTLED_WRITE for w in writes):
        return  # its outcome decides whether there is something to undo
    undone = set(
        run.actions.filter(compensates__isnull=False).values_list("compensates_id", flat=True)
    )
    to_undo = [
        w
        for w in writes
        if w.status == ActionStatus.SUCCEEDED and _undoable(w) and w.pk not in undone
    ]
    if to_undo:
        _plan(run, list(reversed(to_undo)))
    undos = _undos(run)
    if any(u.status in _UNDO_FAILED for u in undos):
        _suspend(run, writes, undos)
        return
    if any(u.status in _IN_FLIGHT for u in undos):
        return
    queued = [u for u in undos if u.status == ActionStatus.QUEUED]
    if queued:
        if not queued[0].task_id:  # one at a time, in order
            queued[0].task_id = "enqueued"
            queued[0].save(update_fields=["task_id"])
            continue_action(queued[0].pk, run_id=queued[0].run_id)
        return
    _finish(run, writes, undos)


def saga_retry(*, run_id: Any, operator: Any) -> AgentRun:
    """An operator retries a rollback that failed: the run goes compensating again and every
    write not yet released gets a fresh compensation under the same key, last write first.

    The key is settled from the tool's receipt lookup first, so the retry cannot undo twice:
    found -> the retry replays that receipt; proven absent -> the key is free to run again.
    A write whose own outcome still needs a human is left to the reconciliation queue. Safe to
    call twice (only a run in rollback_pending moves)."""
    # Looked up before the lock: a lookup may wait for a call in flight under the key.
    lookups = {
        u.idempotency_key: _lookup(u.tool, u.idempotency_key)
        for u in Action.objects.filter(
            run_id=run_id, compensates__isnull=False, status__in=_UNDO_FAILED
        )
    }
    with transaction.atomic():
        run = lock_run(run_id)
        if run.status != RunStatus.ROLLBACK_PENDING:
            return run
        writes = _writes(run)
        if any(w.status == ActionStatus.NEEDS_HUMAN for w in writes):
            return run
        current = {u.compensates_id: u for u in _undos(run)}
        redo = [
            w
            for w in reversed(writes)
            if w.pk in current and current[w.pk].status != ActionStatus.SUCCEEDED
        ]
        for undo in current.values():
            if undo.status == ActionStatus.QUEUED:  # superseded by the fresh plan below
                action_move(undo, ActionStatus.CANCELLED)
        for write in redo:
            key = write.compensation["key"]
            lookup = lookups.get(key)
            if lookup is not None and lookup.status == ReceiptStatus.FOUND:
                idempotency_complete(key=key, response=success(lookup.receipt))
            elif lookup is not None and lookup.status == ReceiptStatus.ABSENT:
                idempotency_release(key=key)
        pending = run.events.filter(kind=EventKind.RUN_ROLLBACK_PENDING).order_by("-seq").first()
        run_move(
            run,
            RunStatus.COMPENSATING,
            reply=pending.payload.get("base_reply", "") if pending else "",
            payload={
                "retry_by": getattr(operator, "get_username", lambda: str(operator))(),
                "to_undo": [w.idempotency_key for w in redo],
            },
        )
        _plan(run, redo)
        saga_advance(run)
    return run


def _lookup(tool: str, key: str) -> ReceiptLookup | None:
    spec = registry.get(tool)
    return spec.lookup_receipt(key) if spec is not None and spec.lookup_receipt else None


def saga_resume(run: AgentRun) -> None:
    """The sweeper's hand on a compensating run nobody moved for a while: the next
    compensation goes on the queue again (a worker may have died between two), in order."""
    if run.status != RunStatus.COMPENSATING:
        return
    undos = _undos(run)
    queued = [u for u in undos if u.status == ActionStatus.QUEUED]
    if queued and not any(u.status in _IN_FLIGHT for u in undos):
        queued[0].task_id = "enqueued"
        queued[0].save(update_fields=["task_id"])
        enqueue_action(queued[0].pk, run_id=queued[0].run_id)
    else:
        saga_advance(run)


def _plan(run: AgentRun, writes: list[Action]) -> None:
    """Register the compensations of ``writes`` (already in the order they must run)."""
    run.turn += 1
    run.save(update_fields=["turn", "updated_at"])
    for index, write in enumerate(writes):
        spec = registry.get(write.tool)
        undo = spec.compensate if spec is not None else None
        receipt = (write.result or {}).get("data") or {}
        target = registry.get(undo.tool) if undo is not None else None
        params = (
            target.input_model.model_validate_json(
                canonical_json(undo.arguments(receipt))
            ).model_dump(mode="json")
            if undo is not None and target is not None
            else {}
        )
        action_create(
            Action(
                run=run,
                turn=run.turn,
                call_index=index,
                tool=write.compensation["tool"],
                params=params,
                params_digest=call_digest(write.compensation["tool"], params),
                readonly=False,
                risk=target.meta.side_effect.value if target is not None else "",
                idempotency_key=write.compensation["key"],
                compensates=write,
                proposal_deadline=None,
            ),
            ActionStatus.QUEUED,
            event=EventKind.COMPENSATION_PLANNED,
            payload={
                "tool": write.compensation["tool"],
                "params": params,
                "idempotency_key": write.compensation["key"],
                "compensates": str(write.pk),
                "compensates_key": write.idempotency_key,
                "label": undo.label(receipt) if undo is not None else "",
            },
            run=run,
        )


def _label(write: Action) -> str:
    spec = registry.get(write.tool)
    receipt = (write.result or {}).get("data") or {}
    if spec is None or spec.compensate is None:
        return write.idempotency_key
    return spec.compensate.label(receipt) or write.idempotency_key


def _verified(run: AgentRun, undo: Action) -> bool:
    """Does the current environment confirm the undo (the compensation tool's own verify)?"""
    spec = registry.get(undo.tool)
    receipt = (undo.result or {}).get("data") or {}
    verdict = spec.verify(receipt, action_context(run, undo))
    trace_append(
        run=run,
        kind=EventKind.VERIFIED,
        action=undo,
        payload={"holds": verdict.holds, "detail": verdict.detail, "compensation": True},
    )
    return verdict.holds


def _sentences(run: AgentRun, kind: ReplyKind, labels: list[str]) -> str:
    assistant = registry.assistant()
    return " ".join(assistant.reply(kind, language=run.language, detail=label) for label in labels)


def _finish(run: AgentRun, writes: list[Action], undos: list[Action]) -> None:
    """Every compensation succeeded: check each against the environment, then end the run."""
    failed = [u for u in undos if not _verified(run, u)]
    if failed:
        _suspend(run, writes, undos, unverified=failed)
        return
    by_write = {u.compensates_id: u for u in undos}
    released = [_label(w) for w in writes if w.pk in by_write]
    outcome = RunOutcome(run.outcome)
    assistant = registry.assistant()
    if outcome == RunOutcome.CANCELLED_BY_USER:
        detail = _sentences(run, ReplyKind.RELEASED, released) or assistant.reply(
            ReplyKind.NONE_HELD, language=run.language
        )
        reply = assistant.reply(ReplyKind.CANCELLED, language=run.language, detail=detail)
        run_move(run, RunStatus.CANCELLED, outcome=outcome, reply=reply)
        return
    reply = " ".join(filter(None, [run.reply, _sentences(run, ReplyKind.RELEASED, released)]))
    run_move(run, RunStatus.FAILED, outcome=outcome, reply=reply)


def _suspend(
    run: AgentRun, writes: list[Action], undos: list[Action], unverified: list[Action] = ()
) -> None:
    """An undo failed: the run waits in rollback_pending,
    with the evidence, and the reply says what is still held."""
    by_write = {u.compensates_id: u for u in undos}
    bad = {u.pk for u in unverified}
    released, held = [], []
    for write in writes:
        undo = by_write.get(write.pk)
        if undo is not None and undo.status == ActionStatus.SUCCEEDED and undo.pk not in bad:
            released.append(_label(write))
        elif write.status == ActionStatus.SUCCEEDED and _undoable(write):
            held.append(_label(write))
    evidence = [
        {
            "action": str(u.pk),
            "compensates": str(u.compensates_id),
            "tool": u.tool,
            "key": u.idempotency_key,
            "status": u.status,
            "attempts": u.attempts,
            "result": u.result,
            "verified": u.pk not in bad if u.status == ActionStatus.SUCCEEDED else None,
        }
        for u in undos
    ]
    parts = [
        _sentences(run, ReplyKind.RELEASED, released),
        _sentences(run, ReplyKind.STILL_HELD, held),
    ]
    detail = " ".join(filter(None, parts))
    if RunOutcome(run.outcome) == RunOutcome.CANCELLED_BY_USER:
        reply = registry.assistant().reply(
            ReplyKind.CANCELLED, language=run.language, detail=detail
        )
    else:
        reply = detail
    run_move(
        run,
        RunStatus.ROLLBACK_PENDING,
        reply=reply,
        payload={
            "released": released,
            "held": held,
            "evidence": evidence,
            "base_reply": run.reply,  # what the run would have said; a retry starts from it
        },
    )
