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
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel

from accounts.selectors import user_roles
from agentops.contract import (
    CallContext,
    Reason,
    ReceiptStatus,
    SideEffect,
    Signal,
    ToolError,
    ToolSpec,
    call_reads,
    canonical_json,
    failure,
    success,
)
from agentops.models import (
    ROLLBACK_RUN_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunStatus,
)
from agentops.runtime import approval, gate, registry
from agentops.runtime.idempotency import (
    Claim,
    ClaimState,
    idempotency_claim,
    idempotency_complete,
    idempotency_release,
    request_digest,
)
from agentops.runtime.invoke import TOOL_CRASHED, faults_for, invoke
from agentops.runtime.kinds import rules
from agentops.runtime.locks import lock_action
from agentops.runtime.queue import continue_here, enqueue_action
from agentops.runtime.runs import (
    StepHereError,
    action_settled,
    install_starter,
    steps_here,
    writes_used,
)
from agentops.runtime.store import action_same_succeeded, run_actions
from agentops.runtime.timing import (
    LEASE_GRACE,
    MAX_BACKOFF_S,
    MAX_YELLOW_RETRIES,
)
from agentops.runtime.trace import trace_append
from agentops.runtime.transitions import action_move, run_move
from agentops.runtime.verifier import action_context
from approvals.services import STALE_CODES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyClaim:
    """What a write found before its call: an earlier identical success of its run (``done``,
    answered from), or its idempotency key's claim."""

    done: Action | None = None
    claim: Claim | None = None


@dataclass(frozen=True)
class Started:
    run: AgentRun
    action: Action
    spec: ToolSpec
    args: BaseModel
    ctx: CallContext
    faults: list[dict[str, Any]]
    alone: bool = False  # the only call of its turn: settled, the turn needs no read
    # A write's key, claimed in the transaction that started it (begin_locked): its intent is
    # committed with the start, one commit instead of two. None: action_call claims it.
    key_claim: KeyClaim | None = None


@dataclass(frozen=True)
class Called:
    envelope: dict[str, Any]
    signal: Signal
    owns_key: bool = False  # this attempt claimed the idempotency key: it settles it


# --- 1. begin ---------------------------------------------------------------------------------


def _precheck(
    run: AgentRun,
    action: Action,
    spec: ToolSpec,
    ctx: CallContext,
    args: BaseModel,
    *,
    roles: frozenset[str],
    actions: list[Action],
):
    """``roles``, ``actions``: the subject's roles and the run's actions, read just now under
    the run lock."""
    if action.proposal_deadline is not None and timezone.now() >= action.proposal_deadline:
        return ToolError(
            Reason.EXPIRED,
            "proposal_expired",
            "This call was proposed too long ago to run now.",
            "Propose it again if it is still wanted.",
        )
    writes_before = 0 if spec.meta.readonly else max(0, writes_used(run, actions) - 1)
    verdict = gate.recheck(
        spec,
        args,
        ctx=ctx,
        roles=roles,
        writes_before=writes_before,
        approved_risk=SideEffect(action.risk or spec.meta.side_effect),
    )
    if verdict is not None:
        return verdict.error
    if action.risk == SideEffect.HIGH:  # last: a valid approval's nonce is consumed here
        return approval.verify_before_execution(run, action, spec, args)
    return None


def begin_locked(
    run: AgentRun,
    action: Action,
    *,
    recheck: bool = True,
    alone: bool = False,
    actions: list[Action] | None = None,
) -> Started | None:
    """Start a queued action. The caller holds the run lock. None if it must not run (then it
    is cancelled or refused, and the run goes on). ``alone``: the caller proposed it as the
    only call of its turn; ``actions``: the run's actions, read under the lock the caller
    holds (spares a write's look for an earlier identical success a read).

    A write's idempotency key is claimed here, in the caller's transaction: its pending intent
    (the running action and the key in progress) commits with it, before the call is made."""
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
    refusal = None
    if recheck and not undo:
        # Read with the run's lock the caller holds (run_action_locked), else now.
        roles = run.roles_as_locked
        if roles is None:
            roles = user_roles(user=run.subject)
        if actions is None:
            actions = run_actions(run)
        # Read here, the run's actions also say whether this call is its turn's only one.
        alone = alone or all(a.pk == action.pk for a in actions if a.turn == action.turn)
        with call_reads():  # the gate's recheck and the approval's binding read once
            refusal = _precheck(run, action, spec, ctx, args, roles=roles, actions=actions)
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
    key_claim = (
        None
        if spec.meta.readonly or not action.idempotency_key
        else _key_claim(run, action, actions)
    )
    return Started(run, action, spec, args, ctx, faults, alone, key_claim)


def action_begin(action_id: Any, *, run_id: Any = None) -> Started | None:
    with transaction.atomic():
        locked = lock_action(action_id, run_id=run_id)
        if locked is None or locked[1].status != ActionStatus.QUEUED:
            return None  # a duplicate delivery, or the sweeper took it over
        return begin_locked(*locked)


# --- 2. call ----------------------------------------------------------------------------------


def _same_succeeded(action: Action, actions: list[Action]) -> Action | None:
    """action_same_succeeded on the run's actions as read under its lock (in proposal order)."""
    return next(
        (
            a
            for a in actions
            if a.tool == action.tool
            and a.params_digest == action.params_digest
            and a.status == ActionStatus.SUCCEEDED
            and a.pk != action.pk
        ),
        None,
    )


def _key_claim(run: AgentRun, action: Action, actions: list[Action] | None = None) -> KeyClaim:
    """A write's look for an earlier identical success of its run, else its key's claim
    (``actions``: the run's actions read under the caller's run lock)."""
    # A run never writes twice for an intent it already holds a confirmed receipt for.
    if rules(run).same_call_once:
        done = (
            action_same_succeeded(action) if actions is None else _same_succeeded(action, actions)
        )
        if done is not None:
            return KeyClaim(done=done)
    digest = request_digest(tool=action.tool, subject_id=run.subject_id, params=action.params)
    return KeyClaim(
        claim=idempotency_claim(
            key=action.idempotency_key, tool=action.tool, subject_id=run.subject_id, digest=digest
        )
    )


def action_call(started: Started) -> Called:
    """Invoke the tool; writes under the action's idempotency key (claimed as the action
    started, or here). Holds no lock."""
    run, action, spec = started.run, started.action, started.spec
    if spec.meta.readonly or not action.idempotency_key:
        return Called(*invoke(spec, started.ctx, started.args, faults=started.faults))
    key_claim = started.key_claim or _key_claim(run, action)
    claim = key_claim.claim
    if claim is None:  # an earlier identical success of the run answers
        done = cast(Action, key_claim.done)
        return Called(done.result | {"deduplicated_from": str(done.pk)}, Signal.GREEN)
    if claim.state == ClaimState.REPLAY:
        return Called(*replay_answer(spec, started.ctx, claim.response))
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


def replay_answer(
    spec: ToolSpec, ctx: CallContext, stored: dict[str, Any]
) -> tuple[dict[str, Any], Signal]:
    """A finished call's key answers from the tool's current receipt, not from the stored
    response alone (seed 002): a green answer is given again only while its receipt still holds
    in the environment (the tool's verify); otherwise the answer says what holds now."""
    signal = Signal(stored["signal"])
    if signal != Signal.GREEN or spec.verify is None:
        return stored, signal
    try:
        verdict = spec.verify(stored.get("data") or {}, ctx)
    except Exception as exc:  # a verify that cannot answer confirms nothing: ask again later
        log.warning("verify of a replayed %s failed: %r", spec.name, exc)
        return (
            failure(
                Reason.UNAVAILABLE,
                "verification_unavailable",
                "The earlier call's receipt could not be checked just now.",
                "Retry shortly with the same key.",
                1000,
            ),
            Signal.YELLOW,
        )
    if verdict.holds:
        return stored, signal
    return _no_longer_holds(stored, verdict.detail), Signal.RED


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


def _no_longer_holds(envelope: dict[str, Any], detail: str) -> dict[str, Any]:
    """The answer for a write whose receipt does not hold in the environment now (seed 002:
    what holds now, not what the call once answered)."""
    refused = failure(
        Reason.CONFLICT,
        "receipt_no_longer_holds",
        f"The call's receipt does not hold now: {detail}.",
        "Nothing more was done; read the current state before acting again.",
    )
    refused["receipt"] = envelope.get("data")
    return refused


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
) -> Action | None:
    """Record the attempt's outcome; the action as it was settled, or None when the attempt
    was no longer the action's (the sweeper took it over).

    When the call ends its turn, the next step is planned in the same transaction
    (runs.next_step). Should that step's statements fail, the transaction is lost with them,
    and the outcome is recorded again without it: the step is claimed after the commit, as
    before. An outcome is never lost to its next step."""
    try:
        with steps_here():
            return _action_finish(action_id, attempt, called, run_id=run_id, alone=alone)
    except StepHereError:
        log.warning("the next step failed in a call's end; recorded without it", exc_info=True)
    with steps_here(on=False):
        return _action_finish(action_id, attempt, called, run_id=run_id, alone=alone)


def _action_finish(
    action_id: Any, attempt: int, called: Called, *, run_id: Any, alone: bool
) -> Action | None:
    with transaction.atomic():
        locked = lock_action(action_id, run_id=run_id)
        if locked is None:
            return None
        run, action = locked
        if action.status != ActionStatus.RUNNING or action.attempts != attempt:
            return None  # the sweeper took this attempt over
        finish_locked(run, action, called, alone=alone)
        return action


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


def _start_here(run: AgentRun, action: Action, actions: list[Action] | None) -> None:
    """runs.start_here: the call started in the caller's transaction, made after its commit."""
    started = begin_locked(run, action, actions=actions)
    if started is not None:
        continue_here(started_call_finish, started)


install_starter(_start_here)
