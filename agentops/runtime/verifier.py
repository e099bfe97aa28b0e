"""Finishing a run: the verifier decides, not the model. A run succeeds only when the current
environment confirms every write's receipt (the tool's own verify), within the delegation."""

from __future__ import annotations

from collections.abc import Iterable

from agentops.contract import Delegation, ReplyKind, Step, StepOutcome, Verification
from agentops.models import (
    UNSETTLED_ACTION_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunOutcome,
    RunStatus,
    TraceEvent,
)
from agentops.runtime import registry
from agentops.runtime.context import action_context
from agentops.runtime.saga import run_end
from agentops.runtime.store import run_actions
from agentops.runtime.trace import events_append, run_event, trace_append
from agentops.runtime.transitions import run_move

_STEP_OUTCOME = {
    StepOutcome.DONE: RunOutcome.NOT_DONE,
    StepOutcome.GAVE_UP: RunOutcome.GAVE_UP,
    StepOutcome.ASK_USER: RunOutcome.ASK_USER,
}


def still_checking(run: AgentRun) -> str:
    """The reply while a write's outcome is unknown: never "booked", never "failed"."""
    return registry.assistant().reply(ReplyKind.STILL_CHECKING, language=run.language)


def call_verify(run: AgentRun, action: Action) -> Verification | None:
    """A confirmed write of a run without a model (a direct call, an MCP session's call),
    checked as it settles: does its receipt hold in the current environment (the tool's own
    verify)? Recorded as a ``verified`` event; None for a read, a refusal or a tool without a
    verify. The caller holds the run lock."""
    if action.readonly or action.status != ActionStatus.SUCCEEDED or action.compensates_id:
        return None
    spec = registry.get(action.tool)
    if spec is None or spec.verify is None:
        return None
    receipt = (action.result or {}).get("data") or {}
    try:
        verdict = spec.verify(receipt, action_context(run, action))
    except Exception as exc:  # a verify that cannot answer confirms nothing
        verdict = Verification(False, f"verification failed: {type(exc).__name__}")
    trace_append(
        run=run,
        kind=EventKind.VERIFIED,
        action=action,
        payload={"holds": verdict.holds, "detail": verdict.detail},
    )
    return verdict


def finish_with_verification(
    run: AgentRun,
    step: Step,
    *,
    actions: list[Action] | None = None,
    step_event: TraceEvent | None = None,
) -> None:
    """The model proposes nothing more. The caller holds the run lock (and passes the run's
    actions when it has just read them under it; ``step_event``: the step's own event, not yet
    appended). A run that succeeds ends in one statement with its step's event and its writes'
    verifications (transitions.run_move's ``before``); any other end appends them first."""
    assistant = registry.assistant()
    if actions is None:
        actions = run_actions(run)
    pending = [step_event] if step_event is not None else []
    if any(a.status in UNSETTLED_ACTION_STATUSES for a in actions):
        events_append(run, pending)
        if run.status == RunStatus.RUNNING:
            run_move(run, RunStatus.RECONCILING)
        run.reply = still_checking(run)
        run.save(update_fields=["reply", "updated_at"])
        return
    writes = sorted(
        (
            a
            for a in actions
            if not a.readonly and a.status == ActionStatus.SUCCEEDED and a.compensates_id is None
        ),
        key=lambda a: (a.turn, a.call_index),
    )
    summaries, problems, gone = [], [], []
    for action in writes:
        spec = registry.get(action.tool)
        receipt = (action.result or {}).get("data") or {}
        verdict = spec.verify(receipt, action_context(run, action))
        pending.append(
            run_event(
                run,
                EventKind.VERIFIED,
                {"holds": verdict.holds, "detail": verdict.detail},
                action=action,
            )
        )
        if not verdict.holds:
            problems.append(verdict.detail)
            gone.append(action.pk)
        elif spec.summarize is not None:
            summaries.append(spec.summarize(receipt, run.language))
        else:
            summaries.append(verdict.detail)
    delegation = Delegation.from_json(run.delegation)
    wanted_write = delegation.max_writes > 0
    # A model that says it is done when nothing confirmed is not repeated ("Nothing was booked.
    # I booked it!"): only what it says when it gives up or asks goes into the reply.
    said = step.message if step.outcome != StepOutcome.DONE else ""
    nothing_done = assistant.reply(
        ReplyKind.NOTHING_DONE, language=run.language, detail=said, writes=_writes(delegation)
    )
    complete = step.outcome == StepOutcome.DONE and not _missing(delegation, writes)
    succeeded = None
    if not problems and summaries and complete:
        succeeded = RunOutcome.VERIFIED, " ".join(summaries)
    elif not problems and not summaries and step.outcome == StepOutcome.DONE and not wanted_write:
        succeeded = RunOutcome.ANSWERED, step.message
    if succeeded is not None:  # the run's end, with the events of this step, in one statement
        outcome, reply = succeeded
        run_move(run, RunStatus.SUCCEEDED, outcome=outcome, reply=reply, before=pending)
        return
    events_append(run, pending)  # the saga's end takes no events of its own
    if problems:
        outcome = RunOutcome.VERIFICATION_FAILED
        run_end(run, RunStatus.FAILED, outcome=outcome, reply=nothing_done, gone=gone)
    elif summaries and not complete:  # a part of a multi-write request: undone, not reported
        outcome = _STEP_OUTCOME[step.outcome]
        run_end(run, RunStatus.FAILED, outcome=outcome, reply=nothing_done)
    else:  # writes it confirmed on the way are undone first (runtime.saga)
        # "Nothing was booked" only where a write was granted: a question, a list or an
        # answer of a read-only request is the planner's own words.
        reply = nothing_done if wanted_write or not step.message.strip() else step.message
        run_end(run, RunStatus.FAILED, outcome=_STEP_OUTCOME[step.outcome], reply=reply)


def _writes(delegation: Delegation) -> frozenset[str]:
    """The write tools the request allowed (the reply says which kind of thing was not done)."""
    specs = (registry.get(name) for name in delegation.tools)
    return frozenset(s.name for s in specs if s is not None and not s.meta.readonly)


def _missing(delegation: Delegation, writes: Iterable[Action]) -> set[str]:
    """The named things of a several-resource delegation (one write each) that no confirmed
    write covers: such a request is done only when all of them are."""
    if not delegation.resources:
        return set()
    covered = set()
    for action in writes:
        spec = registry.get(action.tool)
        if spec is not None and spec.scope.resource:
            covered.add(action.params.get(spec.scope.resource))
    return set(delegation.resources) - covered


def finish_unverified(run: AgentRun, outcome: RunOutcome) -> None:
    """End early (budget, loop, model down): calls that have not started never will, and only
    verified receipts may be reported, so the reply says nothing was done (writes confirmed on
    the way are undone first: runtime.saga)."""
    assistant = registry.assistant()
    stopped = assistant.reply(ReplyKind.STOPPED, language=run.language, detail=outcome.value)
    writes = _writes(Delegation.from_json(run.delegation))
    reply = assistant.reply(
        ReplyKind.NOTHING_DONE, language=run.language, detail=stopped, writes=writes
    )
    run_end(run, RunStatus.FAILED, outcome=outcome, reply=reply)
