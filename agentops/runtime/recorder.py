"""The one recorder of governed calls. Every channel (assistant runs through Celery, direct
calls from the JSON API, screens and MCP) goes through the same three steps, with the same rows
and trace events:

1. begin: under the run lock, check again that the call may run (deadline, authorization, scope,
   risk), move it to running and trace it; this commits the pending intent before any write.
2. call: claim the idempotency key (writes), invoke the tool with its timeout.
3. finish: under the run lock, record the envelope, settle the key, move the action and let
   the run go on (next call, next step, reconciliation, or the end of a direct call).
"""

from __future__ import annotations

import logging
import random
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel

from accounts.selectors import user_roles
from agentops.contract import (
    CallContext,
    Delegation,
    Reason,
    ReceiptStatus,
    SideEffect,
    Signal,
    ToolError,
    ToolSpec,
    canonical_json,
    failure,
    message_text,
    success,
)
from agentops.contract.limits import refused_input, safe_text
from agentops.models import (
    ROLLBACK_RUN_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunKind,
    RunOutcome,
    RunStatus,
)
from agentops.runtime import approval, gate, registry
from agentops.runtime.idempotency import (
    ClaimState,
    idempotency_claim,
    idempotency_complete,
    idempotency_release,
    request_digest,
)
from agentops.runtime.invoke import TOOL_CRASHED, faults_for, invoke
from agentops.runtime.kinds import rules, run_create
from agentops.runtime.locks import lock_action, lock_run
from agentops.runtime.proposals import call_digest, proposal_record
from agentops.runtime.queue import enqueue_action
from agentops.runtime.runs import action_settled, writes_used
from agentops.runtime.store import action_same_succeeded
from agentops.runtime.timing import (
    DIRECT_BUDGETS,
    LEASE_GRACE,
    MAX_BACKOFF_S,
    MAX_YELLOW_RETRIES,
    Budgets,
)
from agentops.runtime.trace import trace_append
from agentops.runtime.transitions import action_move, actions_cancel_unstarted, run_move
from agentops.runtime.verifier import action_context
from approvals.services import STALE_CODES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Started:
    run: AgentRun
    action: Action
    spec: ToolSpec
    args: BaseModel
    ctx: CallContext
    faults: list[dict[str, Any]]
    alone: bool = False  # the only call of its turn: settled, the turn needs no read


@dataclass(frozen=True)
class Called:
    envelope: dict[str, Any]
    signal: Signal
    owns_key: bool = False  # this attempt claimed the idempotency key: it settles it


# --- 1. begin ---------------------------------------------------------------------------------


def _precheck(run: AgentRun, action: Action, spec: ToolSpec, ctx: CallContext, args: BaseModel):
    if action.proposal_deadline is not None and timezone.now() >= action.proposal_deadline:
        return ToolError(
            Reason.EXPIRED,
            "proposal_expired",
            "This call was proposed too long ago to run now.",
            "Propose it again if it is still wanted.",
        )
    writes_before = 0 if spec.meta.readonly else max(0, writes_used(run) - 1)
    verdict = gate.recheck(
        spec,
        args,
        ctx=ctx,
        roles=user_roles(user=run.subject),
        writes_before=writes_before,
        approved_risk=SideEffect(action.risk or spec.meta.side_effect),
    )
    if verdict is not None:
        return verdict.error
    if action.risk == SideEffect.HIGH:  # last: a valid approval's nonce is consumed here
        return approval.verify_before_execution(run, action, spec, args)
    return None


def begin_locked(
    run: AgentRun, action: Action, *, recheck: bool = True, alone: bool = False
) -> Started | None:
    """Start a queued action. The caller holds the run lock. None if it must not run (then it
    is cancelled or refused, and the run goes on). ``alone``: the caller proposed it as the
    only call of its turn."""
    spec = registry.get(action.tool)
    undo = action.compensates_id is not None
    if run.is_terminal or (run.status in ROLLBACK_RUN_STATUSES and not undo):
        action_move(
            action,
            ActionStatus.CANCELLED,
            event=EventKind.EXECUTION_SKIPPED,
            run=run,
            payload={"why": "run is terminal" if run.is_terminal else "run is rolling back"},
        )
        return None
    args = spec.input_model.model_validate_json(canonical_json(action.params))
    ctx = action_context(run, action)
    # A compensation is the host's undo of the run's own confirmed write, outside what the
    # request delegated by nature; the tool still checks who may do it (e.g. one's own booking).
    refusal = _precheck(run, action, spec, ctx, args) if recheck and not undo else None
    now = timezone.now()
    if refusal is not None and refusal.code in STALE_CODES:
        # A genuine approval that no longer fits: kept as evidence, the action frozen until a
        # fresh approval of the same intent against the current state.
        action_move(
            action,
            ActionStatus.WAITING_APPROVAL,
            event=EventKind.APPROVAL_FROZEN,
            run=run,
            payload={"code": refusal.code, "message": refusal.message},
            task_id="",
        )
        if run.status == RunStatus.RUNNING and rules(run).approval_holds_run:
            run_move(run, RunStatus.WAITING_APPROVAL, payload={"turn": action.turn})
        return None
    if refusal is not None:
        envelope = refusal.envelope()
        action_move(
            action,
            ActionStatus.REJECTED,
            event=EventKind.PRECHECK_REFUSED,
            run=run,
            payload={"tool": action.tool, "refusal": envelope},
            result=envelope,
            finished_at=now,
        )
        action_settled(run, action)
        return None
    run.tool_calls += 1
    action_move(
        action,
        ActionStatus.RUNNING,
        event=EventKind.EXECUTION_STARTED,
        run=run,
        payload={
            "tool": action.tool,
            "attempt": action.attempts + 1,
            "idempotency_key": action.idempotency_key,
        },
        run_fields=("tool_calls",),
        started_at=now,
        attempts=action.attempts + 1,
        lease_expires_at=now + timedelta(seconds=spec.meta.timeout_s) + LEASE_GRACE,
    )
    faults: list[dict[str, Any]] = []
    if run.faults:  # which call of this tool this is, for injected faults only
        call_number = sum(run.actions.filter(tool=action.tool).values_list("attempts", flat=True))
        faults = faults_for(run.faults, action.tool, call_number)
    return Started(run, action, spec, args, ctx, faults, alone)


def action_begin(action_id: Any, *, run_id: Any = None) -> Started | None:
    with transaction.atomic():
        locked = lock_action(action_id, run_id=run_id)
        if locked is None or locked[1].status != ActionStatus.QUEUED:
            return None  # a duplicate delivery, or the sweeper took it over
        return begin_locked(*locked)


# --- 2. call ----------------------------------------------------------------------------------


def action_call(started: Started) -> Called:
    """Invoke the tool; writes under the action's idempotency key. Holds no lock."""
    run, action, spec = started.run, started.action, started.spec
    if spec.meta.readonly or not action.idempotency_key:
        return Called(*invoke(spec, started.ctx, started.args, faults=started.faults))
    # A run never writes twice for an intent it already holds a confirmed receipt for.
    done = rules(run).same_call_once and action_same_succeeded(action)
    if done:
        return Called(done.result | {"deduplicated_from": str(done.pk)}, Signal.GREEN)
    digest = request_digest(tool=action.tool, subject_id=run.subject_id, params=action.params)
    claim = idempotency_claim(
        key=action.idempotency_key, tool=action.tool, subject_id=run.subject_id, digest=digest
    )
    if claim.state == ClaimState.REPLAY:
        return Called(claim.response, Signal(claim.response["signal"]))
    if claim.state == ClaimState.REUSE:
        return Called(
            failure(
                Reason.IDEMPOTENCY_KEY_REUSE,
                "idempotency_key_reuse",
                "This idempotency key was already used for a different request.",
                "Use a new key for a new request.",
            ),
            Signal.RED,
        )
    if claim.state == ClaimState.IN_PROGRESS:
        if action.attempts > 1:
            # Our own earlier attempt holds the key and its outcome is unknown: reconcile it.
            return Called(
                failure(
                    Reason.UNKNOWN_OUTCOME,
                    "unknown_outcome",
                    "An earlier attempt's outcome is unknown.",
                    "The host is reconciling.",
                ),
                Signal.UNKNOWN,
            )
        return Called(
            failure(
                Reason.IN_PROGRESS,
                "in_progress",
                "A call with this key is still running.",
                "Retry after a moment with the same key.",
                500,
            ),
            Signal.YELLOW,
        )
    envelope, signal = invoke(spec, started.ctx, started.args, faults=started.faults)
    if envelope.get("code") == TOOL_CRASHED:
        envelope, signal = _settle_crash(spec, action.idempotency_key, envelope)
    return Called(envelope, signal, owns_key=True)


def _settle_crash(spec: ToolSpec, key: str, crash: dict[str, Any]) -> tuple[dict[str, Any], Signal]:
    """The tool raised: ask it at once what happened under the key, so the claim is settled
    now rather than left in progress. Found: the write happened (its receipt). Proven absent:
    nothing was written, the call failed, and the key is given back for a retry. Unclear: an
    unknown outcome, reconciled like any other."""
    try:
        lookup = spec.lookup_receipt(key)
    except Exception:  # the lookup failing too leaves the outcome unknown
        return crash, Signal.UNKNOWN
    if lookup.status == ReceiptStatus.FOUND:
        return success(lookup.receipt), Signal.GREEN
    if lookup.status == ReceiptStatus.ABSENT:
        return failure(
            Reason.UNAVAILABLE,
            TOOL_CRASHED,
            f"{crash['message']} Nothing was written.",
            "Try again; the same idempotency key may be reused.",
            200,
        ), Signal.YELLOW
    return crash, Signal.UNKNOWN


# --- 3. finish --------------------------------------------------------------------------------


def _backoff_s(attempt: int) -> float:
    jitter = 0.5 + random.random()  # noqa: S311
    return min(MAX_BACKOFF_S, 0.05 * 2**attempt) * jitter * settings.AGENT_RETRY_BACKOFF_SCALE


def finish_locked(run: AgentRun, action: Action, called: Called, *, alone: bool = False) -> None:
    """Record an attempt's envelope. The caller holds the run lock; the action is running
    (``alone``: the only call of its turn, Started.alone)."""
    now = timezone.now()
    signal = called.signal
    retry = (
        signal == Signal.YELLOW
        and rules(run).transient_retries
        and action.attempts <= MAX_YELLOW_RETRIES
        and not run.is_terminal
        and (run.status not in ROLLBACK_RUN_STATUSES or action.compensates_id is not None)
    )
    to = {
        Signal.GREEN: ActionStatus.SUCCEEDED,
        Signal.UNKNOWN: ActionStatus.UNKNOWN_OUTCOME,
    }.get(signal, ActionStatus.QUEUED if retry else ActionStatus.FAILED)
    if called.owns_key:
        if signal in (Signal.GREEN, Signal.RED):
            idempotency_complete(key=action.idempotency_key, response=called.envelope)
        elif signal == Signal.YELLOW:
            idempotency_release(key=action.idempotency_key)
    duration_ms = int((now - action.started_at).total_seconds() * 1000)
    action_move(
        action,
        to,
        event=EventKind.EXECUTION_FINISHED,
        run=run,
        payload={
            "tool": action.tool,
            "attempt": action.attempts,
            "outcome": signal.value,
            "duration_ms": duration_ms,
            "result": called.envelope,
        },
        result=called.envelope,
        finished_at=now,
        duration_ms=duration_ms,
        lease_expires_at=None,
    )
    if retry:
        delay = _backoff_s(action.attempts)
        trace_append(
            run=run,
            kind=EventKind.RETRY_SCHEDULED,
            action=action,
            payload={"attempt": action.attempts + 1, "delay_ms": int(delay * 1000)},
        )
        enqueue_action(action.pk, countdown=delay, run_id=run.pk)
    action_settled(run, action, alone=alone)


def action_finish(
    action_id: Any, attempt: int, called: Called, *, run_id: Any = None, alone: bool = False
) -> None:
    with transaction.atomic():
        locked = lock_action(action_id, run_id=run_id)
        if locked is None:
            return
        run, action = locked
        if action.status != ActionStatus.RUNNING or action.attempts != attempt:
            return  # the sweeper took this attempt over
        finish_locked(run, action, called, alone=alone)


def started_call_finish(started: Started) -> None:
    """Make the call of a started action and record its outcome (its begin has committed)."""
    action_finish(
        started.action.pk,
        started.action.attempts,
        action_call(started),
        run_id=started.run.pk,
        alone=started.alone,
    )


def action_execute(action_id: Any, *, run_id: Any = None) -> None:
    """Execute one queued action of a run (the Celery task's body)."""
    started = action_begin(action_id, run_id=run_id)
    if started is not None:
        started_call_finish(started)


# --- direct calls -----------------------------------------------------------------------------


def tool_call_governed(
    *,
    user: Any,
    name: str,
    arguments: Any,
    idempotency_key: str | None = None,
    channel: str = "api",
    session_run_id: Any = None,
) -> dict[str, Any]:
    """Gate, then execute one call for ``user`` (from the session or token). Recorded as a
    one-action run, or, with ``session_run_id``, as the next turn of that session's run (an MCP
    session: one run, its own budgets). Writes carry ``<channel>:<user>:<key>`` when the caller
    gave an Idempotency-Key; otherwise a fresh key (direct calls) or the host's
    ``run:turn:index`` (sessions). Returns the envelope; a refusal has written nothing but its
    records. A call that needs a human approval waits for one: the answer says so and where to
    poll."""
    given = f"{channel}:{user.pk}:{idempotency_key}" if idempotency_key else None
    if given:
        waiting = _waiting_under(given, user=user, name=name, arguments=arguments)
        if waiting is not None:
            return waiting
    roles = user_roles(user=user)
    try:
        begun = _direct_propose(
            user=user,
            name=name,
            arguments=arguments,
            roles=roles,
            key=given,
            channel=channel,
            session_run_id=session_run_id,
        )
    except Exception as exc:  # a bug before the call was recorded: record the attempt instead
        log.exception("direct call of %s failed before it ran", safe_text(name, 64))
        return _direct_crashed(user=user, name=name, arguments=arguments, exc=exc)
    if not isinstance(begun, Started):
        return begun
    called = action_call(begun)
    action_finish(begun.action.pk, begun.action.attempts, called, run_id=begun.run.pk)
    return called.envelope


@transaction.atomic
def _direct_propose(
    *,
    user: Any,
    name: str,
    arguments: Any,
    roles: frozenset[str],
    key: str | None,
    channel: str,
    session_run_id: Any,
) -> Started | dict[str, Any]:
    """Record the call's run (or session turn) and gate it: the envelope when it ends here
    (refused, waiting for an approval, the session over), else the started action, its intent
    committed with the transaction."""
    if session_run_id is None:
        run, ctx, usage = _direct_run(user=user, name=name, roles=roles)
        key = key or f"{channel}:{user.pk}:{uuid.uuid4().hex}"
    else:
        opened = _session_turn(session_run_id, user=user, name=name, arguments=arguments)
        if isinstance(opened, dict):
            return opened
        run, ctx, usage = opened
    verdict, action = proposal_record(
        run=run,
        ctx=ctx,
        roles=roles,
        turn=run.turn,
        index=0,
        tool=name,
        arguments=arguments,
        writes_so_far=0 if usage is None else writes_used(run),
        usage=usage,
        key=key,
    )
    if action.status == ActionStatus.REJECTED:
        _refused(run, verdict)
        return action.result
    if action.status == ActionStatus.WAITING_APPROVAL:
        if rules(run).approval_holds_run:
            run_move(run, RunStatus.WAITING_APPROVAL, payload={"turn": run.turn})
        return pending_envelope(action)
    # The gate ran in this same transaction: no second check before the first attempt.
    return begin_locked(run, action, recheck=False)


def _direct_crashed(*, user: Any, name: str, arguments: Any, exc: Exception) -> dict[str, Any]:
    """The answer and the record of a direct call that failed inside the runtime before it ran:
    a failed run whose trace says so, with a digest of the input (nothing was written: the
    transaction that would have recorded the call rolled back). If even that cannot be
    recorded (the database is gone), the original error goes on to the caller."""
    envelope = failure(
        Reason.UNAVAILABLE,
        "internal_error",
        f"The call could not be processed ({type(exc).__name__}); nothing was written.",
        "Try again shortly.",
        1000,
    )
    try:
        with transaction.atomic():
            run, _, _ = _direct_run(user=user, name=name, roles=frozenset())
            payload = {"tool": safe_text(name, 64), "decision": "refuse", "check": "internal"}
            trace_append(
                run=run,
                kind=EventKind.GATE,
                payload=payload | {"refusal": envelope} | refused_input(arguments),
            )
            run_move(run, RunStatus.FAILED, outcome=RunOutcome.CALL_FAILED, reply="")
    except Exception:
        raise exc from None
    return envelope


def _direct_run(*, user: Any, name: str, roles: frozenset[str]):
    delegation = Delegation(
        tools=frozenset(s.name for s in registry.visible_to(roles)), max_writes=1
    )
    run = run_create(
        kind=RunKind.DIRECT,
        subject=user,
        goal=f"API call {safe_text(name, 64)}",
        model_name="direct",
        delegation=delegation,
        budgets=DIRECT_BUDGETS,
        turn=1,
        proposals=1,
    )
    return run, CallContext(user=user, run_id=str(run.pk), delegation=delegation), None


def _session_turn(run_id: Any, *, user: Any, name: str, arguments: Any):
    """The next turn of a session run, locked, with what it has used so far; or the refusal
    when the session's run has ended."""
    run = lock_run(run_id)
    if run.subject_id != user.pk:  # the caller maps sessions per subject: never happens
        raise PermissionError("a session run belongs to its subject only")
    if run.is_terminal:
        return failure(
            Reason.RUN_TERMINAL,
            "session_ended",
            f"This session's run has ended ({run.outcome}).",
            "Open a new session.",
        )
    run.turn += 1
    run.proposals += 1
    run.save(update_fields=["turn", "proposals", "updated_at"])
    digest = call_digest(name, arguments)
    usage = gate.RunUsage(
        budgets=Budgets.from_json(run.budgets),
        proposals=run.proposals,
        tool_calls=run.tool_calls,
        past_deadline=timezone.now() >= run.deadline,
        same_calls_before=lambda: run.actions.filter(params_digest=digest).count(),
    )
    ctx = CallContext(
        user=user, run_id=str(run.pk), delegation=Delegation.from_json(run.delegation)
    )
    return run, ctx, usage


def _refused(run: AgentRun, verdict: gate.Verdict) -> None:
    """A direct call's run ends with its refusal; a session goes on unless the refusal ends it
    (budget, loop)."""
    if rules(run).refusal_ends_run:
        run_move(run, RunStatus.FAILED, outcome=RunOutcome.REFUSED, reply="")
    elif verdict.decision == gate.GateDecision.ABORT:
        outcome = (
            RunOutcome.LOOP_DETECTED
            if verdict.check == gate.GateCheck.LOOP
            else RunOutcome.BUDGET_EXHAUSTED
        )
        actions_cancel_unstarted(run)
        run_move(run, RunStatus.FAILED, outcome=outcome, reply="")


def pending_envelope(action: Action) -> dict[str, Any]:
    """The answer to a direct call that waits for a human: transient, with where to look."""
    reasons = "; ".join(map(message_text, action.risk_reasons)) or "high risk"
    envelope = failure(
        Reason.IN_PROGRESS,
        "approval_pending",
        f"This call needs a human approval ({reasons}); it runs once an approver approves it.",
        "Poll the run; an approver decides in the approvals inbox.",
    )
    envelope["pending"] = {
        "run_id": str(action.run_id),
        "action_id": str(action.pk),
        "poll": f"/api/runs/{action.run_id}",
        "deadline": action.proposal_deadline.isoformat(),
    }
    return envelope


def _waiting_under(key: str, *, user: Any, name: str, arguments: Any) -> dict[str, Any] | None:
    """A retried call whose first attempt is still waiting for its approval answers the same
    pending state instead of asking a second time; other parameters under the key are refused."""
    action = (
        Action.objects.filter(
            idempotency_key=key,
            run__subject=user,
            status__in=[ActionStatus.WAITING_APPROVAL, ActionStatus.QUEUED, ActionStatus.RUNNING],
        )
        .order_by("-created_at")
        .first()
    )
    if action is None:
        return None
    if action.tool != name or action.params_digest != call_digest(name, arguments):
        return failure(
            Reason.IDEMPOTENCY_KEY_REUSE,
            "idempotency_key_reuse",
            "This Idempotency-Key was already used with a different request.",
            "Use a new key for a new request.",
        )
    if action.status == ActionStatus.WAITING_APPROVAL:
        return pending_envelope(action)
    return failure(
        Reason.IN_PROGRESS,
        "in_progress",
        "A request with this key is still running.",
        "Retry after a moment with the same key.",
        500,
    )
