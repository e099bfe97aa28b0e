"""Finishing a run: the verifier decides, not the model. A run succeeds only when the current
environment confirms every write's receipt (the tool's own verify), within the delegation."""

from __future__ import annotations

from agentops import registry
from agentops.contract import CallContext, Delegation, ReplyKind, Step, StepOutcome
from agentops.models import (
    UNSETTLED_ACTION_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunOutcome,
    RunStatus,
)
from agentops.runtime.transitions import actions_cancel_unstarted, run_move
from agentops.trace import trace_append

_STEP_OUTCOME = {
    StepOutcome.DONE: RunOutcome.NOT_DONE,
    StepOutcome.GAVE_UP: RunOutcome.GAVE_UP,
    StepOutcome.ASK_USER: RunOutcome.ASK_USER,
}


def action_context(run: AgentRun, action: Action) -> CallContext:
    """Who and what a call of this action runs as: the run's subject, never the model's say."""
    return CallContext(
        user=run.subject,
        run_id=str(run.pk),
        action_id=str(action.pk),
        idempotency_key=action.idempotency_key,
        delegation=Delegation.from_json(run.delegation),
    )


def still_checking(run: AgentRun) -> str:
    """The reply while a write's outcome is unknown: never "booked", never "failed"."""
    return registry.assistant().reply(ReplyKind.STILL_CHECKING, language=run.language)


def finish_with_verification(run: AgentRun, step: Step) -> None:
    """The model proposes nothing more. The caller holds the run lock."""
    assistant = registry.assistant()
    if run.actions.filter(status__in=UNSETTLED_ACTION_STATUSES).exists():
        if run.status == RunStatus.RUNNING:
            run_move(run, RunStatus.RECONCILING)
        run.reply = still_checking(run)
        run.save(update_fields=["reply", "updated_at"])
        return
    writes = run.actions.filter(readonly=False, status=ActionStatus.SUCCEEDED).order_by(
        "turn", "call_index"
    )
    summaries, problems = [], []
    for action in writes:
        spec = registry.get(action.tool)
        receipt = (action.result or {}).get("data") or {}
        verdict = spec.verify(receipt, action_context(run, action))
        trace_append(
            run=run,
            kind=EventKind.VERIFIED,
            action=action,
            payload={"holds": verdict.holds, "detail": verdict.detail},
        )
        if not verdict.holds:
            problems.append(verdict.detail)
        elif spec.summarize is not None:
            summaries.append(spec.summarize(receipt, run.language))
        else:
            summaries.append(verdict.detail)
    wanted_write = Delegation.from_json(run.delegation).max_writes > 0
    nothing_done = assistant.reply(
        ReplyKind.NOTHING_DONE, language=run.language, detail=step.message
    )
    if problems:
        run_move(run, RunStatus.FAILED, outcome=RunOutcome.VERIFICATION_FAILED, reply=nothing_done)
    elif summaries:
        run_move(run, RunStatus.SUCCEEDED, outcome=RunOutcome.VERIFIED, reply=" ".join(summaries))
    elif step.outcome == StepOutcome.DONE and not wanted_write:
        run_move(run, RunStatus.SUCCEEDED, outcome=RunOutcome.ANSWERED, reply=step.message)
    else:
        run_move(run, RunStatus.FAILED, outcome=_STEP_OUTCOME[step.outcome], reply=nothing_done)


def finish_unverified(run: AgentRun, outcome: RunOutcome) -> None:
    """End early (budget, loop, model down): calls that have not started never will, and only
    verified receipts may be reported, so the reply says nothing was done."""
    assistant = registry.assistant()
    actions_cancel_unstarted(run)
    stopped = assistant.reply(ReplyKind.STOPPED, language=run.language, detail=outcome.value)
    reply = assistant.reply(ReplyKind.NOTHING_DONE, language=run.language, detail=stopped)
    run_move(run, RunStatus.FAILED, outcome=outcome, reply=reply)
