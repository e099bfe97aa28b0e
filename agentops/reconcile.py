"""Reconciling unknown outcomes: ask the tool what happened under the action's key.

Found -> take that receipt; proven absent -> run it again with the same key (rechecked before it
runs, like any attempt); still unclear -> a human decides from the operators' queue.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agentops import registry
from agentops.contract import ReceiptStatus, success
from agentops.idempotency import idempotency_complete, idempotency_release
from agentops.models import Action, ActionStatus, EventKind, RunStatus
from agentops.runtime.locks import lock_action
from agentops.runtime.queue import enqueue_action
from agentops.runtime.runs import action_settled
from agentops.runtime.timing import MAX_RECONCILE_RETRIES
from agentops.runtime.transitions import action_move
from agentops.runtime.verifier import still_checking
from agentops.trace import trace_append


def action_reconcile(action_id: Any) -> None:
    action = Action.objects.filter(pk=action_id).first()
    if action is None or action.status != ActionStatus.UNKNOWN_OUTCOME:
        return
    lookup = registry.get(action.tool).lookup_receipt(action.idempotency_key)
    with transaction.atomic():
        locked = lock_action(action_id)
        if locked is None or locked[1].status != ActionStatus.UNKNOWN_OUTCOME:
            return
        run, action = locked
        trace_append(
            run=run,
            kind=EventKind.RECONCILE_LOOKUP,
            action=action,
            payload={
                "key": action.idempotency_key,
                "status": lookup.status.value,
                "detail": lookup.detail,
                "receipt": lookup.receipt,
            },
        )
        if lookup.status == ReceiptStatus.FOUND:
            envelope = success(lookup.receipt)
            action_move(action, ActionStatus.SUCCEEDED, result=envelope)
            idempotency_complete(key=action.idempotency_key, response=envelope)
            action_settled(run, action)
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
            idempotency_release(key=action.idempotency_key)
            action_move(action, ActionStatus.QUEUED, task_id="enqueued")
            trace_append(
                run=run,
                kind=EventKind.RECONCILE_RETRY,
                action=action,
                payload={"key": action.idempotency_key},
            )
            enqueue_action(action.pk)
        else:
            action_move(action, ActionStatus.NEEDS_HUMAN)
            trace_append(
                run=run,
                kind=EventKind.RECONCILE_NEEDS_HUMAN,
                action=action,
                payload={"key": action.idempotency_key},
            )
            if run.status == RunStatus.COMPENSATING:
                # The saga decides: an undo nobody can confirm -> rollback_pending; a write
                # of the run -> the rollback waits for the operators' decision on it.
                action_settled(run, action)
                return
            run.reply = still_checking(run)
            run.save(update_fields=["reply", "updated_at"])
