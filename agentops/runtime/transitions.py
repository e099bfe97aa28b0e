"""Every status change of a run or an action goes through this module. The allowed moves are
data (RUN_MOVES, ACTION_MOVES), checked by tests; a move not in the table raises.

Callers hold the row locks (runtime.locks) and are inside a transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentops.contract import run_finished_announce
from agentops.models import (
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunOutcome,
    RunStatus,
    TraceEvent,
)
from agentops.runtime import approval, store
from agentops.runtime.trace import (
    action_insert_with_event,
    action_save_with_event,
    run_save_with_event,
)

# Every non-terminal status may end through compensating: a run that cannot finish undoes the
# writes it confirmed first (runtime.saga). A failed undo waits in rollback_pending for a
# human, who retries it (compensating again) or closes the run.
RUN_MOVES: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.WAITING_APPROVAL,
            RunStatus.RECONCILING,
            RunStatus.COMPENSATING,
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
        }
    ),
    RunStatus.WAITING_APPROVAL: frozenset(
        {RunStatus.RUNNING, RunStatus.COMPENSATING, RunStatus.FAILED, RunStatus.CANCELLED}
    ),
    RunStatus.RECONCILING: frozenset(
        {
            RunStatus.RUNNING,
            RunStatus.COMPENSATING,
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
        }
    ),
    RunStatus.COMPENSATING: frozenset(
        {RunStatus.ROLLBACK_PENDING, RunStatus.FAILED, RunStatus.CANCELLED}
    ),
    RunStatus.ROLLBACK_PENDING: frozenset(
        {RunStatus.COMPENSATING, RunStatus.FAILED, RunStatus.CANCELLED}
    ),
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}

# None: the statuses an action may be created in.
ACTION_MOVES: dict[ActionStatus | None, frozenset[ActionStatus]] = {
    None: frozenset({ActionStatus.REJECTED, ActionStatus.QUEUED, ActionStatus.WAITING_APPROVAL}),
    ActionStatus.WAITING_APPROVAL: frozenset(
        {ActionStatus.QUEUED, ActionStatus.REJECTED, ActionStatus.CANCELLED}
    ),
    ActionStatus.QUEUED: frozenset(
        {
            ActionStatus.RUNNING,
            ActionStatus.REJECTED,
            ActionStatus.CANCELLED,
            ActionStatus.WAITING_APPROVAL,  # its approval drifted or expired: frozen
        }
    ),
    ActionStatus.RUNNING: frozenset(
        {
            ActionStatus.SUCCEEDED,
            ActionStatus.FAILED,
            ActionStatus.QUEUED,  # a transient failure retried, or a read whose worker died
            ActionStatus.UNKNOWN_OUTCOME,
        }
    ),
    ActionStatus.UNKNOWN_OUTCOME: frozenset(
        {
            ActionStatus.SUCCEEDED,
            ActionStatus.QUEUED,
            ActionStatus.NEEDS_HUMAN,
            ActionStatus.CANCELLED,  # proven absent, and its run is being rolled back
        }
    ),
    ActionStatus.NEEDS_HUMAN: frozenset(
        {ActionStatus.SUCCEEDED, ActionStatus.QUEUED, ActionStatus.FAILED}
    ),
    ActionStatus.SUCCEEDED: frozenset(),
    ActionStatus.FAILED: frozenset(),
    ActionStatus.REJECTED: frozenset(),
    ActionStatus.CANCELLED: frozenset(),
}

_RUN_EVENT = {
    RunStatus.WAITING_APPROVAL: EventKind.RUN_WAITING_APPROVAL,
    RunStatus.RECONCILING: EventKind.RUN_RECONCILING,
    RunStatus.RUNNING: EventKind.RUN_RESUMED,
    RunStatus.COMPENSATING: EventKind.RUN_COMPENSATING,
    RunStatus.ROLLBACK_PENDING: EventKind.RUN_ROLLBACK_PENDING,
}


class IllegalMoveError(Exception):
    """A status change the tables do not allow: a bug, never a user error."""


def run_move(
    run: AgentRun,
    to: RunStatus,
    *,
    outcome: RunOutcome | None = None,
    reply: str | None = None,
    payload: dict[str, Any] | None = None,
    before: Sequence[TraceEvent] = (),
) -> None:
    """Move the run to ``to`` and trace it. Terminal moves need an outcome; nothing moves a
    terminal run. ``before``: events of the run not yet appended (trace.run_event), numbered
    just before the move's own in the same statement."""
    if to not in RUN_MOVES[RunStatus(run.status)]:
        raise IllegalMoveError(f"run {run.pk}: {run.status} -> {to}")
    run.status = to
    fields = ["status"]
    if outcome is not None:
        run.outcome = outcome
        fields.append("outcome")
    if reply is not None:
        run.reply = reply[:2000]
        fields.append("reply")
    terminal = to in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
    if terminal:
        if outcome is None:
            raise IllegalMoveError(f"run {run.pk}: terminal move without an outcome")
        run.finished_at = timezone.now()
        fields.append("finished_at")
    # The run's row and its event in one statement.
    if terminal:
        event = {"status": to.value, "outcome": run.outcome, "reply": run.reply}
        kind, event = EventKind.RUN_FINISHED, event | (payload or {})
    else:
        kind, event = _RUN_EVENT[to], payload or {}
    run_save_with_event(run=run, fields=tuple(fields), kind=kind, payload=event, before=before)
    if terminal:
        finished = {
            "run_id": str(run.pk),
            "subject_id": run.subject_id,
            "status": to.value,
            "outcome": str(run.outcome),
            "reply": run.reply,
        }
        transaction.on_commit(lambda: run_finished_announce(finished), robust=True)


def action_move(
    action: Action,
    to: ActionStatus,
    *,
    event: EventKind | None = None,
    payload: dict[str, Any] | None = None,
    run: AgentRun | None = None,
    run_fields: tuple[str, ...] = (),
    **fields: Any,
) -> None:
    """Move a saved action to ``to``, setting ``fields`` in the same UPDATE. With ``event``, the
    move is saved by the statement that appends that event to the action's run (``payload``;
    ``run_fields`` of ``run``, the caller's locked instance of it, saved too)."""
    if to not in ACTION_MOVES[ActionStatus(action.status)]:
        raise IllegalMoveError(f"action {action.pk}: {action.status} -> {to}")
    action.status = to
    for name, value in fields.items():
        setattr(action, name, value)
    names = ("status", *fields)
    _save(action, names, event=event, payload=payload, run=run, run_fields=run_fields)


def action_create(
    action: Action,
    status: ActionStatus,
    *,
    event: EventKind | None = None,
    payload: dict[str, Any] | None = None,
    run: AgentRun | None = None,
    run_fields: tuple[str, ...] = (),
    before: TraceEvent | None = None,
) -> Action:
    """Save a new action in one of the statuses actions are created in; with ``event``, in the
    statement that appends that event (as action_move), and ``before`` it, if given, an event
    of the run (trace.run_event)."""
    if status not in ACTION_MOVES[None]:
        raise IllegalMoveError(f"an action cannot be created {status}")
    if before is not None and event is None:
        raise ValueError("an earlier event goes in with the action's own")
    action.status = status
    _save(action, None, event=event, payload=payload, run=run, run_fields=run_fields, before=before)
    return action


def _save(
    action: Action,
    names: tuple[str, ...] | None,
    *,
    event: EventKind | None,
    payload: dict[str, Any] | None,
    run: AgentRun | None,
    run_fields: tuple[str, ...],
    before: TraceEvent | None = None,
) -> None:
    """Save ``names`` of the action (None: insert it), in the statement that appends ``event``
    to its run when there is one (``run``: the caller's instance of it; else the action's;
    ``before``: action_create's)."""
    if event is None:
        if names is None:
            store.action_insert(action)
        else:
            store.action_save(action, names)
    elif names is None:
        action_insert_with_event(
            run=action.run if run is None else run,
            action=action,
            kind=event,
            payload=payload,
            run_fields=run_fields,
            before=before,
        )
    else:
        action_save_with_event(
            run=action.run if run is None else run,
            action=action,
            fields=names,
            kind=event,
            payload=payload,
            run_fields=run_fields,
        )


def actions_cancel_unstarted(run: AgentRun) -> int:
    """Calls of a run that has ended and that have not started never will."""
    approval.withdraw_pending(run)
    cancellable = [s for s, moves in ACTION_MOVES.items() if s and ActionStatus.CANCELLED in moves]
    return run.actions.filter(status__in=cancellable).update(status=ActionStatus.CANCELLED)
