"""One step of a run: the model proposes, the gate decides, the calls are recorded and the
next one starts. A step claims its turn first, so a duplicate delivery of the same turn plans
nothing; a remote planner runs outside any lock (it may take seconds), a local one inside its
claim's transaction (Planner.local: about a millisecond, nothing it could wait on).

Costs (bench/README.md, "runtime overhead"): the run is locked and its actions read once per
step, and every check (proposed already, writes used, loops) is made on that list; a step's
one call starts in the step's own transaction (its gate ran there), so the worker goes on to
the call without locking the run again.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from agentops.contract import CallContext, Delegation, Step
from agentops.models import (
    OPEN_ACTION_STATUSES,
    WRITE_COUNTING_STATUSES,
    Action,
    ActionStatus,
    EventKind,
    RunOutcome,
    RunStatus,
    TraceEvent,
)
from agentops.runtime import gate, verifier
from agentops.runtime.locks import lock_run
from agentops.runtime.model_context import build_context, planner_for
from agentops.runtime.proposals import call_digest, proposal_record
from agentops.runtime.queue import continue_here
from agentops.runtime.recorder import begin_locked, started_call_finish
from agentops.runtime.runs import StepHereError, advance_locked, install_stepper, writes_used
from agentops.runtime.store import (
    run_actions,
    run_turn_take,
    run_unsaved_save,
    run_with_subject,
    turn_claim,
)
from agentops.runtime.timing import Budgets
from agentops.runtime.trace import run_event, trace_append
from agentops.runtime.transitions import run_move

log = logging.getLogger(__name__)


def _may_take(run: Any, actions: list[Action], turn: int) -> bool:
    """What the claim of a turn checks but the budgets (agentops.runtime.store.turn_claim), on a run
    locked and read: running, no call open, at the turn before or at this one with nothing
    proposed."""
    return (
        run.status == RunStatus.RUNNING
        and not any(a.status in OPEN_ACTION_STATUSES for a in actions)
        and (
            run.turn == turn - 1 or (run.turn == turn and not any(a.turn == turn for a in actions))
        )
    )


def run_step(run_id: Any, turn: int) -> None:
    """Plan turn ``turn`` of the run. A duplicate delivery of the same turn does nothing.

    The claim locks the run until its transaction ends. A local planner (Planner) plans in that
    transaction and the step is applied there too: the claim, the step and its call's start
    commit together, with no second lock of the run or read of its actions. Any other planner
    plans after the claim has committed, outside any lock."""
    with transaction.atomic():
        claimed = turn_claim(run_id, turn, now=timezone.now(), max_turns=Budgets().max_turns)
        if claimed is not None:
            run, roles = claimed  # the roles as of the claim: the context and gate of this step
            try:
                planner = planner_for(run)
            except Exception as exc:  # e.g. a model endpoint not configured
                _planner_failed(run, turn, exc)
                return
            if getattr(planner, "local", False):
                # A first turn has no history: its claim found no call proposed in it, and none
                # comes before.
                actions = [] if turn == 1 else run_actions(run)
                try:
                    step = planner.propose(build_context(run, roles=roles, actions=actions))
                except DatabaseError:
                    raise  # the transaction is lost: the claim with it, and the sweeper steps again
                except Exception as exc:
                    _planner_failed(run, turn, exc)
                    return
                _apply_locked(run, actions, turn, step, roles)
                return
    if claimed is None:
        _unclaimed(run_id, turn)
        return
    ctx = build_context(run, roles=roles, actions=[] if turn == 1 else None)
    try:
        step = planner.propose(ctx)
    except Exception as exc:
        with transaction.atomic():
            run = lock_run(run_id)
            if run.status == RunStatus.RUNNING:
                _planner_failed(run, turn, exc)
        return
    _apply_step(run_id, turn, step, roles)


def _step_here(run: Any, turn: int, actions_now: list[Action] | None) -> bool:
    """runs.next_step: plan turn ``turn`` in the caller's transaction, which holds the run's
    lock (a call's end); False, with nothing changed, when the turn is not one to take here.

    It checks what TURN_CLAIM_SQL checks, on the run as locked (running, within its deadline and
    turns, at the turn before, no call open), with the subject's roles read with that lock; a
    turn that the budgets no longer allow is left to run_step, which ends the run so. The turn
    is saved by the step's first save of the run (store.run_turn_take). Only a local planner
    plans here: a remote one may take seconds, and plans outside any lock. A failed statement
    raises StepHereError: the caller's transaction is lost, and the caller does its own work
    again without the step."""
    roles = run.roles_as_locked
    if (
        roles is None
        or run.status != RunStatus.RUNNING
        or run.turn != turn - 1
        or timezone.now() >= run.deadline
        or turn > Budgets.from_json(run.budgets).max_turns
    ):
        return False
    try:
        planner = planner_for(run)
    except Exception:
        return False  # run_step records the planner's failure
    if not getattr(planner, "local", False):
        return False
    actions = list(run_actions(run) if actions_now is None else actions_now)
    if any(a.status in OPEN_ACTION_STATUSES for a in actions):
        return False
    run_turn_take(run, turn)
    try:
        try:
            step = planner.propose(build_context(run, roles=roles, actions=actions))
        except DatabaseError:
            raise
        except Exception as exc:
            _planner_failed(run, turn, exc)
        else:
            _apply_locked(run, actions, turn, step, roles)
        if run.unsaved_fields:  # every path saves the run; should one not, the turn is saved
            run_unsaved_save(run)
    except DatabaseError as exc:
        raise StepHereError(f"run {run.pk}, turn {turn}") from exc
    return True


install_stepper(_step_here)


def _planner_failed(run: Any, turn: int, exc: Exception) -> None:
    """The planner raised: the run ends, unverified (the caller holds the run lock)."""
    log.error("planner failed for run %s", run.pk, exc_info=exc)
    trace_append(
        run=run,
        kind=EventKind.MODEL_ERROR,
        payload={"turn": turn, "error": type(exc).__name__},
    )
    verifier.finish_unverified(run, RunOutcome.MODEL_UNAVAILABLE)


def _unclaimed(run_id: Any, turn: int) -> None:
    """The turn was not there to take: a duplicate or early delivery (nothing to do), or the
    run's turns or deadline are spent, and then it ends so."""
    run = run_with_subject(run_id)
    if run is None or run.status != RunStatus.RUNNING or run.turn not in (turn - 1, turn):
        return
    if turn <= Budgets.from_json(run.budgets).max_turns and timezone.now() < run.deadline:
        return  # a call of the run is still open, or this turn has proposed already
    with transaction.atomic():
        run = lock_run(run_id)
        if not _may_take(run, run_actions(run), turn):
            return
        trace_append(
            run=run,
            kind=EventKind.BUDGET_EXHAUSTED,
            payload={"turn": turn, "budget": "turns/deadline"},
        )
        verifier.finish_unverified(run, RunOutcome.BUDGET_EXHAUSTED)


def _apply_step(run_id: Any, turn: int, step: Step, roles: frozenset[str]) -> None:
    """Gate and record the step's proposals. The run is locked and its actions read once;
    the checks (proposed already, writes used, loops) are made on that list."""
    with transaction.atomic():
        run = lock_run(run_id)
        actions = run_actions(run)
        if (
            run.status != RunStatus.RUNNING
            or run.turn != turn
            or any(a.turn == turn for a in actions)
        ):
            return
        _apply_locked(run, actions, turn, step, roles)


def _apply_locked(
    run: Any,
    actions: list[Action],
    turn: int,
    step: Step,
    roles: frozenset[str],
) -> None:
    """_apply_step's work on the run locked (its turn claimed) and its actions read."""
    payload = {
        "turn": turn,
        "proposals": [{"tool": p.tool, "arguments": p.arguments} for p in step.proposals],
        "message": step.message[:500],
        "outcome": step.outcome.value if not step.proposals else "",
    }
    if not step.proposals:  # the step's event goes in with the run's end
        verifier.finish_with_verification(
            run, step, actions=actions, step_event=run_event(run, EventKind.MODEL_STEP, payload)
        )
        return
    # The step's event goes in with its first proposal's, in one statement.
    step_event: TraceEvent | None = run_event(run, EventKind.MODEL_STEP, payload)
    ctx = CallContext(
        user=run.subject, run_id=str(run.pk), delegation=Delegation.from_json(run.delegation)
    )
    budgets = Budgets.from_json(run.budgets)
    writes_so_far = writes_used(run, actions)
    waiting = False
    created: list[Action] = []
    for index, proposal in enumerate(step.proposals):
        run.proposals += 1
        usage = gate.RunUsage(
            budgets=budgets,
            proposals=run.proposals,
            tool_calls=run.tool_calls,
            past_deadline=timezone.now() >= run.deadline,
            same_calls_before=functools.partial(_same_calls_before, actions, proposal),
        )
        verdict, action = proposal_record(
            run=run,
            ctx=ctx,
            roles=roles,
            turn=turn,
            index=index,
            tool=proposal.tool,
            arguments=proposal.arguments,
            writes_so_far=writes_so_far,
            usage=usage,
            run_fields=("proposals",),
            before=step_event,
        )
        step_event = None
        actions.append(action)
        created.append(action)
        if not action.readonly and action.status in WRITE_COUNTING_STATUSES:
            writes_so_far += 1
        waiting = waiting or action.status == ActionStatus.WAITING_APPROVAL
        if verdict.decision == gate.GateDecision.ABORT:
            # The gate's every refusal and abort carries its error (gate._refuse).
            reason = verdict.error.reason  # type: ignore[union-attr]
            verifier.finish_unverified(run, RunOutcome(reason.value))
            return
    queued = [a for a in created if a.status == ActionStatus.QUEUED]
    if waiting:
        run_move(run, RunStatus.WAITING_APPROVAL, payload={"turn": turn})
    elif len(queued) == 1:  # the step's one call: gated in this transaction, start it here
        started = begin_locked(
            run,
            queued[0],
            recheck=False,
            alone=len(created) == 1,
            actions=actions,
        )
        if started is not None:
            continue_here(started_call_finish, started)
    else:
        advance_locked(run, turn, turn_actions=created)


def _same_calls_before(actions: list[Action], proposal: Any) -> int:
    digest = call_digest(proposal.tool, proposal.arguments)
    tool = str(proposal.tool)[:64]
    return sum(1 for a in actions if a.params_digest == digest and a.tool == tool)
