"""The governed call of every channel that has no model: a direct call (JSON API, the booking
screens through the contract's governor) is a one-action run; an MCP session's call is the next
turn of the session's run. Each goes through the one recorder (runtime.recorder): gate,
idempotency, approvals, execution, verification and trace, as an assistant run's calls do."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any, cast

from django.db import transaction
from django.utils import timezone

from accounts.selectors import user_roles
from agentops.contract import (
    CallContext,
    Delegation,
    Reason,
    SideEffect,
    failure,
    message_text,
)
from agentops.contract.limits import refused_input, safe_text
from agentops.models import (
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunKind,
    RunOutcome,
    RunStatus,
)
from agentops.runtime import gate, registry
from agentops.runtime.context import action_context
from agentops.runtime.idempotency import request_digest
from agentops.runtime.kinds import rules, run_create
from agentops.runtime.locks import lock_run
from agentops.runtime.proposals import call_digest, proposal_record
from agentops.runtime.recorder import (
    Started,
    _no_longer_holds,
    action_call,
    action_finish,
    begin_locked,
    replay_answer,
)
from agentops.runtime.runs import writes_used
from agentops.runtime.timing import (
    DIRECT_BUDGETS,
    Budgets,
)
from agentops.runtime.trace import trace_append
from agentops.runtime.transitions import actions_cancel_unstarted, run_move
from approvals.selectors import approval_request_approved

log = logging.getLogger(__name__)


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
    settled = action_finish(begun.action.pk, begun.action.attempts, called, run_id=begun.run.pk)
    verification = settled.verification if settled is not None else None
    if verification is not None and not verification.holds:  # never green for what is gone
        return _no_longer_holds(called.envelope, verification.detail)
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
        # proposal_record stores every rejected action's refusal envelope as its result.
        return cast(dict[str, Any], action.result)
    if action.status == ActionStatus.WAITING_APPROVAL:
        if rules(run).approval_holds_run:
            run_move(run, RunStatus.WAITING_APPROVAL, payload={"turn": run.turn})
        return pending_envelope(action)
    # The gate ran in this same transaction: no second check before the first attempt.
    # Never None: begin_locked declines only a terminal or rolling-back run; this run is fresh
    # or a session turn checked not terminal under its lock, and direct and MCP runs never
    # compensate (kinds.rules), so they never roll back.
    return cast(Started, begin_locked(run, action, recheck=False))


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


def _direct_run(
    *, user: Any, name: str, roles: frozenset[str]
) -> tuple[AgentRun, CallContext, gate.RunUsage | None]:
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


def _session_turn(
    run_id: Any, *, user: Any, name: str, arguments: Any
) -> dict[str, Any] | tuple[AgentRun, CallContext, gate.RunUsage]:
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
        # proposal_record gives every action it records a deadline (its approval's, waiting).
        "deadline": cast(datetime, action.proposal_deadline).isoformat(),
    }
    return envelope


def _waiting_under(key: str, *, user: Any, name: str, arguments: Any) -> dict[str, Any] | None:
    """A retried call whose first attempt is still waiting for its approval answers the same
    pending state instead of asking a second time; one whose approved attempt finished answers
    what it did (``_approved_replay``); other parameters under the key are refused."""
    action = (
        Action.objects.filter(
            idempotency_key=key,
            run__subject=user,
            status__in=[
                ActionStatus.WAITING_APPROVAL,
                ActionStatus.QUEUED,
                ActionStatus.RUNNING,
                ActionStatus.SUCCEEDED,
            ],
        )
        .select_related("run")
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
    if action.status == ActionStatus.SUCCEEDED:
        return _approved_replay(action)
    if action.status == ActionStatus.WAITING_APPROVAL:
        return pending_envelope(action)
    return failure(
        Reason.IN_PROGRESS,
        "in_progress",
        "A request with this key is still running.",
        "Retry after a moment with the same key.",
        500,
    )


def _approved_replay(action: Action) -> dict[str, Any] | None:
    """The same key and request after its approved call succeeded: the answer is what that
    call did, from the tool's current receipt (recorder's replay: green only while it still
    holds), never a second approval of a booking already made. Seed 002: a replay does not get
    round the policy, so it answers only for an action that ran on a signed approval of this
    very intent (its approved request's binding carries the same intent digest); nothing runs
    again. A call that needed no approval (None) goes its usual way: the idempotency record
    replays it after the gate."""
    if action.risk != SideEffect.HIGH.value:
        return None
    approved = approval_request_approved(action_ref=str(action.pk))
    digest = request_digest(
        tool=action.tool, subject_id=action.run.subject_id, params=action.params
    )
    if approved is None or approved.binding.get("intent_digest") != digest:
        return None
    spec = registry.get(action.tool)
    if spec is None:
        return None
    envelope, _signal = replay_answer(spec, action_context(action.run, action), action.result or {})
    return envelope
