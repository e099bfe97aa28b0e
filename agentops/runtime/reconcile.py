"""Reconciling unknown outcomes: ask the tool what happened under the action's key.

Found -> take that receipt; proven absent -> run it again with the same key (rechecked before it
runs, like any attempt); still unclear -> a human decides from the operators' queue.

A human decision (``action_reconcile_decide``) takes the same three roads, but only when the
tool's lookup, asked again at the moment of the decision, supports it: nobody types a receipt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy

from accounts.models import AuditAction, Role, User
from accounts.selectors import user_roles
from accounts.services import audit_record
from agentops.contract import Reason, ReceiptLookup, ReceiptStatus, failure, success
from agentops.models import (
    ROLLBACK_RUN_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunOutcome,
    RunStatus,
    TraceEvent,
)
from agentops.runtime import registry
from agentops.runtime.idempotency import idempotency_complete, idempotency_release
from agentops.runtime.invoke import inflight_key
from agentops.runtime.locks import lock_action
from agentops.runtime.queue import enqueue_action, enqueue_reconcile_resume
from agentops.runtime.queue_notice import queue_entered, queue_poke
from agentops.runtime.redis_client import get_redis
from agentops.runtime.runs import action_settled
from agentops.runtime.saga import saga_retry
from agentops.runtime.timing import MAX_RECONCILE_RETRIES, OPERATOR_DECISION_WINDOW
from agentops.runtime.trace import trace_append
from agentops.runtime.transitions import action_move
from agentops.runtime.verifier import finish_unverified, still_checking

log = logging.getLogger(__name__)


def receipt_lookup(action: Action) -> ReceiptLookup:
    """What the action's tool says happened under its key. A tool that is gone or whose lookup
    fails answers "unknown": that never supports accepting or retrying."""
    spec = registry.get(action.tool)
    if spec is None or spec.lookup_receipt is None or not action.idempotency_key:
        return ReceiptLookup(ReceiptStatus.UNKNOWN, detail="no receipt lookup for this call")
    if get_redis().exists(inflight_key(action.idempotency_key)):
        # The call timed out but its thread still runs: "absent" now could be "written" in a
        # moment. Ask again once it has ended.
        return ReceiptLookup(ReceiptStatus.UNKNOWN, detail=STILL_RUNNING)
    try:
        return spec.lookup_receipt(action.idempotency_key)
    except Exception:
        log.exception("receipt lookup failed for action %s", action.pk)
        return ReceiptLookup(ReceiptStatus.UNKNOWN, detail=LOOKUP_FAILED)


# A lookup that raised (its database session ended, a timeout) says nothing about the write:
# the action stays unknown and the sweeper asks again; only after more failures than this
# does a human take over (as for a lookup that answers "unknown").
LOOKUP_FAILED = "the receipt lookup failed"
STILL_RUNNING = "the timed-out call is still running"
MAX_LOOKUP_FAILURES = 3


def _failed_lookups(action: Action) -> int:
    return TraceEvent.objects.filter(
        action=action, kind=EventKind.RECONCILE_LOOKUP, payload__detail=LOOKUP_FAILED
    ).count()


def _lookup_payload(action: Action, lookup: ReceiptLookup) -> dict[str, Any]:
    return {
        "key": action.idempotency_key,
        "status": lookup.status.value,
        "detail": lookup.detail,
        "receipt": lookup.receipt,
    }


def _accept(run: AgentRun, action: Action, lookup: ReceiptLookup) -> None:
    envelope = success(lookup.receipt)
    action_move(action, ActionStatus.SUCCEEDED, result=envelope)
    idempotency_complete(key=action.idempotency_key, response=envelope)


def _retry(run: AgentRun, action: Action) -> None:
    idempotency_release(key=action.idempotency_key)
    action_move(
        action,
        ActionStatus.QUEUED,
        event=EventKind.RECONCILE_RETRY,
        payload={"key": action.idempotency_key},
        run=run,
        task_id="enqueued",
    )
    enqueue_action(action.pk, run_id=action.run_id)


def action_reconcile(action_id: Any) -> None:
    action = Action.objects.filter(pk=action_id).first()
    if action is None or action.status != ActionStatus.UNKNOWN_OUTCOME:
        return
    lookup = receipt_lookup(action)
    with transaction.atomic():
        locked = lock_action(action_id)
        if locked is None or locked[1].status != ActionStatus.UNKNOWN_OUTCOME:
            return
        run, action = locked
        trace_append(
            run=run,
            kind=EventKind.RECONCILE_LOOKUP,
            action=action,
            payload=_lookup_payload(action, lookup),
        )
        if lookup.status == ReceiptStatus.FOUND:
            _accept(run, action, lookup)
            action_settled(run, action)
        elif lookup.detail == LOOKUP_FAILED and _failed_lookups(action) <= MAX_LOOKUP_FAILURES:
            return  # asked again at the next sweep
        elif lookup.detail == STILL_RUNNING:
            return  # asked again at the next sweep, once the call's thread has ended
        elif (
            lookup.status == ReceiptStatus.ABSENT
            and run.status == RunStatus.COMPENSATING
            and action.compensates_id is None
        ):
            # Proven not written, and its run is being rolled back: it never will be.
            action_move(action, ActionStatus.CANCELLED)
            action_settled(run, action)
        elif (
            lookup.status == ReceiptStatus.ABSENT
            and action.attempts <= MAX_RECONCILE_RETRIES
            and not run.is_terminal
        ):
            _retry(run, action)
        else:
            action_move(
                action,
                ActionStatus.NEEDS_HUMAN,
                event=EventKind.RECONCILE_NEEDS_HUMAN,
                payload={"key": action.idempotency_key},
                run=run,
            )
            queue_entered(action=action)
            if run.status == RunStatus.COMPENSATING:
                # The saga decides: an undo nobody can confirm -> rollback_pending; a write
                # of the run -> the rollback waits for the operators' decision on it.
                action_settled(run, action)
                return
            run.reply = still_checking(run)
            run.save(update_fields=["reply", "updated_at"])


# --- human decisions from the operators' queue -------------------------------------------------


class Decision(StrEnum):
    ACCEPT = "accept"  # take the receipt the lookup found
    RETRY = "retry"  # run again with the same key: the lookup proves nothing was written
    ABANDON = "abandon"  # give up: the person is told it was not done


DECISION_LABELS = {
    Decision.ACCEPT: gettext_lazy("Accept the receipt"),
    Decision.RETRY: gettext_lazy("Retry with the same key"),
    Decision.ABANDON: gettext_lazy("Abandon"),
}

_AUDIT = {
    Decision.ACCEPT: AuditAction.RECONCILE_ACCEPTED,
    Decision.RETRY: AuditAction.RECONCILE_RETRIED,
    Decision.ABANDON: AuditAction.RECONCILE_ABANDONED,
}


def decisions_allowed(*, lookup: ReceiptLookup, run_terminal: bool) -> frozenset[Decision]:
    """What a lookup supports: a found receipt may only be accepted (abandoning would tell the
    person "not booked" while a booking exists); a proven absence may be retried (unless the run
    has ended) or abandoned; an unclear answer may only be abandoned."""
    if lookup.status == ReceiptStatus.FOUND:
        return frozenset({Decision.ACCEPT})
    if lookup.status == ReceiptStatus.ABSENT:
        if run_terminal:
            return frozenset({Decision.ABANDON})
        return frozenset({Decision.RETRY, Decision.ABANDON})
    return frozenset({Decision.ABANDON})


@dataclass(frozen=True)
class DecisionResult:
    ok: bool
    code: str
    message: str
    lookup: ReceiptLookup | None = None


def _refused(code: str, message: str, lookup: ReceiptLookup | None = None) -> DecisionResult:
    return DecisionResult(False, code, message, lookup)


def may_reconcile(*, user: User) -> bool:
    """Operators and admins decide unclear writes."""
    return bool({Role.OPERATOR, Role.ADMIN} & user_roles(user=user))


def action_reconcile_decide(
    *, action_id: Any, operator: User, decision: Decision | str
) -> DecisionResult:
    """Settle an action waiting for a human, as ``operator`` decided, if the tool's lookup asked
    now supports the decision.

    Locks the run, then the action. In one transaction: the action's move, its idempotency
    record, a ``reconcile_decided`` trace event, the audit entry, and the run's next move
    (resume, or end). A refusal writes nothing."""
    if not may_reconcile(user=operator):
        return _refused("forbidden", gettext("Only operators and admins decide unclear writes."))
    try:
        decision = Decision(decision)
    except ValueError:
        return _refused("bad_decision", gettext("Choose accept, retry or abandon."))
    action = Action.objects.filter(pk=action_id).first()
    if action is None or action.status != ActionStatus.NEEDS_HUMAN:
        return _refused("not_waiting", gettext("This call no longer waits for a decision."))
    lookup = receipt_lookup(action)  # outside the locks: it may wait for an in-flight write
    with transaction.atomic():
        locked = lock_action(action_id)
        if locked is None or locked[1].status != ActionStatus.NEEDS_HUMAN:
            return _refused("not_waiting", gettext("This call no longer waits for a decision."))
        run, action = locked
        if decision not in decisions_allowed(lookup=lookup, run_terminal=run.is_terminal):
            return _refused("lookup_disagrees", _disagreement(decision, lookup, run), lookup)
        _record_decision(run, action, operator, decision, lookup)
        if decision == Decision.ACCEPT:
            _accept(run, action, lookup)
            enqueue_reconcile_resume(action.pk)  # the next step is a worker's, not this request's
        elif decision == Decision.RETRY:
            _retry(run, action)
        else:
            _abandon(run, action)
    return DecisionResult(True, decision.value, _done_message(decision), lookup)


def action_reconcile_resume(action_id: Any) -> None:
    """After an operator accepted a receipt: the run goes on from it (next step, or the end of a
    direct call). Safe to call twice: only a run still reconciling moves."""
    with transaction.atomic():
        locked = lock_action(action_id)
        if locked is None:
            return
        run, action = locked
        waiting = run.status == RunStatus.RECONCILING or run.status in ROLLBACK_RUN_STATUSES
        if action.status == ActionStatus.SUCCEEDED and waiting:
            action_settled(run, action)  # a rollback then releases the accepted write


def _record_decision(
    run: AgentRun, action: Action, operator: User, decision: Decision, lookup: ReceiptLookup
) -> None:
    payload = _lookup_payload(action, lookup)
    trace_append(
        run=run,
        kind=EventKind.RECONCILE_DECIDED,
        action=action,
        payload=payload | {"decision": decision.value, "operator": operator.get_username()},
    )
    audit_record(
        actor=operator,
        action=_AUDIT[decision],
        target=f"action:{action.pk}",
        run_id=run.pk,
        detail={
            "tool": action.tool,
            "key": action.idempotency_key,
            "lookup": lookup.status.value,
            "receipt": lookup.receipt,
        },
    )
    queue_poke()
    # A human decision may come long after the run's deadline: like an approval, it gives the
    # call and the run a fresh window to finish in.
    fresh = timezone.now() + OPERATOR_DECISION_WINDOW
    if not run.is_terminal and run.deadline < fresh:
        run.deadline = fresh
        run.save(update_fields=["deadline", "updated_at"])
    if decision == Decision.RETRY:
        action.proposal_deadline = fresh
        action.save(update_fields=["proposal_deadline"])


def _abandon(run: AgentRun, action: Action) -> None:
    envelope = failure(
        Reason.RUN_TERMINAL,
        "abandoned_by_operator",
        "An operator abandoned this call: whether it took effect could not be settled.",
        "Tell the user it was not done; do not retry.",
    )
    action_move(action, ActionStatus.FAILED, result=envelope)
    # The key answers the same from now on: a replay gets the abandonment, never a new write.
    idempotency_complete(key=action.idempotency_key, response=envelope)
    if run.status in ROLLBACK_RUN_STATUSES:
        action_settled(run, action)  # a rollback waiting on this write goes on without it
    elif not run.is_terminal:
        finish_unverified(run, RunOutcome.ABANDONED)


def _disagreement(decision: Decision, lookup: ReceiptLookup, run: AgentRun) -> str:
    if decision == Decision.RETRY and run.is_terminal:
        return gettext("The run has ended: nothing may be written for it any more.")
    if lookup.status == ReceiptStatus.FOUND:
        return gettext("The lookup now finds a receipt under this key: accept it instead.")
    if lookup.status == ReceiptStatus.ABSENT:
        return gettext(
            "The lookup now proves nothing was written under this key: "
            "there is no receipt to accept."
        )
    return gettext(
        "The lookup cannot tell what happened under this key: only abandoning is possible."
    )


def _done_message(decision: Decision) -> str:
    if decision == Decision.ACCEPT:
        return gettext("Receipt accepted; the run goes on from it.")
    if decision == Decision.RETRY:
        return gettext("Retrying with the same key.")
    return gettext("Abandoned; the requester is told it was not done.")


def rollback_retry_decide(*, run_id: Any, operator: User) -> DecisionResult:
    """An operator retries the failed release of a run in ``rollback_pending``
    (`runtime.saga.saga_retry`: each key is settled from its receipt lookup first, so nothing is
    undone twice), audited in the same transaction. A refusal writes nothing."""
    if not may_reconcile(user=operator):
        return _refused("forbidden", gettext("Only operators and admins decide unclear writes."))
    with transaction.atomic():
        run = AgentRun.objects.filter(pk=run_id).first()
        if run is None or run.status != RunStatus.ROLLBACK_PENDING:
            return _refused("not_waiting", gettext("This run no longer waits for a decision."))
        run = saga_retry(run_id=run.pk, operator=operator)
        if run.status != RunStatus.COMPENSATING:
            transaction.set_rollback(True)
            return _refused(
                "write_unsettled",
                gettext("A write of this run still waits for a decision above: settle it first."),
            )
        audit_record(
            actor=operator,
            action=AuditAction.ROLLBACK_RESOLVED,
            target=f"run:{run.pk}",
            run_id=run.pk,
            detail={"decision": "retry_release"},
        )
    return DecisionResult(True, "retry_release", gettext("Retrying the release."))
