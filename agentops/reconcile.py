"""Reconciling unknown outcomes, and the sweeper that finds work a dead worker left behind."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentops import registry
from agentops.contract import (
    UNKNOWN_OUTCOME,
    ReceiptStatus,
    failure,
    success,
)
from agentops.idempotency import (
    idempotency_complete,
    idempotency_release,
)
from agentops.models import (
    Action,
    ActionStatus,
    AgentRun,
    RunStatus,
)
from agentops.queueing import enqueue_action, enqueue_reconcile, enqueue_step
from agentops.runs import advance, run_enter_reconciling, run_resume_if_clear, still_checking_reply
from agentops.trace import trace_append

log = logging.getLogger(__name__)


MAX_RECONCILE_RETRIES = 3

# --- reconciliation ---------------------------------------------------------------------------


def action_reconcile(action_id: Any) -> None:
    """Ask the tool what happened under the action's key: found -> take the receipt; proven
    absent -> run it again with the same key; unclear -> a human decides."""
    action = Action.objects.select_related("run").get(pk=action_id)
    if action.status != ActionStatus.UNKNOWN_OUTCOME:
        return
    spec = registry.get(action.tool)
    lookup = spec.lookup_receipt(action.idempotency_key)
    with transaction.atomic():
        action = (
            Action.objects.select_for_update(of=("self",)).select_related("run").get(pk=action_id)
        )
        if action.status != ActionStatus.UNKNOWN_OUTCOME:
            return
        run = AgentRun.objects.select_for_update().get(pk=action.run_id)
        trace_append(
            run=run,
            kind="reconcile_lookup",
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
            action.status, action.result = ActionStatus.SUCCEEDED, envelope
            action.save(update_fields=["status", "result"])
            idempotency_complete(key=action.idempotency_key, response=envelope)
            run_resume_if_clear(run, action.turn)
        elif (
            lookup.status == ReceiptStatus.ABSENT
            and action.attempts <= MAX_RECONCILE_RETRIES
            and not run.is_terminal
        ):
            idempotency_release(key=action.idempotency_key)
            action.status, action.task_id = ActionStatus.QUEUED, "enqueued"
            action.save(update_fields=["status", "task_id"])
            trace_append(
                run=run,
                kind="reconcile_retry",
                action=action,
                payload={"key": action.idempotency_key},
            )
            enqueue_action(action.pk)
        else:
            action.status = ActionStatus.NEEDS_HUMAN
            action.save(update_fields=["status"])
            run.reply = still_checking_reply(run.language)
            run.save(update_fields=["reply", "updated_at"])
            trace_append(
                run=run,
                kind="reconcile_needs_human",
                action=action,
                payload={"key": action.idempotency_key},
            )


# --- the sweeper: work stuck after a crash --------------------------------------------------------

STALE_AFTER = timedelta(seconds=20)


def sweep() -> dict[str, int]:
    """Re-enqueue or reconcile work a dead worker left behind. Safe to run any time."""
    from agentops.models import IdempotencyRecord

    now = timezone.now()
    counts = {"expired_leases": 0, "requeued": 0, "reconciles": 0, "steps": 0}
    for action_id in Action.objects.filter(
        status=ActionStatus.RUNNING, lease_expires_at__lt=now
    ).values_list("pk", flat=True):
        with transaction.atomic():
            action = (
                Action.objects.select_for_update(of=("self",))
                .select_related("run")
                .get(pk=action_id)
            )
            if action.status != ActionStatus.RUNNING or action.lease_expires_at >= now:
                continue
            counts["expired_leases"] += 1
            run = AgentRun.objects.select_for_update().get(pk=action.run_id)
            if action.readonly:
                action.status, action.task_id = ActionStatus.QUEUED, "enqueued"
                action.save(update_fields=["status", "task_id"])
                trace_append(
                    run=run, kind="lease_expired", action=action, payload={"then": "requeued"}
                )
                enqueue_action(action.pk)
            else:
                action.status = ActionStatus.UNKNOWN_OUTCOME
                action.result = failure(
                    UNKNOWN_OUTCOME,
                    "worker_lost",
                    "The worker stopped in the middle of this write.",
                    "The host reconciles it.",
                )
                action.save(update_fields=["status", "result"])
                run_enter_reconciling(
                    run, action, kind="lease_expired", payload={"then": "reconcile"}
                )
    for action_id in Action.objects.filter(status=ActionStatus.UNKNOWN_OUTCOME).values_list(
        "pk", flat=True
    ):
        counts["reconciles"] += 1
        enqueue_reconcile(action_id)
    stale = now - STALE_AFTER
    for action_id in Action.objects.filter(
        status=ActionStatus.QUEUED,
        created_at__lt=stale,
        run__status__in=[RunStatus.RUNNING, RunStatus.RECONCILING],
    ).values_list("pk", flat=True):
        counts["requeued"] += 1
        enqueue_action(action_id)
    for run in AgentRun.objects.filter(status=RunStatus.RUNNING, updated_at__lt=stale):
        if run.actions.filter(status__in=[ActionStatus.QUEUED, ActionStatus.RUNNING]).exists():
            continue
        counts["steps"] += 1
        if run.turn == 0 or not run.actions.filter(turn=run.turn).exists():
            enqueue_step(run.pk, max(run.turn, 1))
        else:
            advance(run.pk, run.turn)
    counts["settled_claims"] = _settle_abandoned_claims(now)
    IdempotencyRecord.objects.filter(expires_at__lt=now).delete()
    return counts


ABANDONED_AFTER = timedelta(minutes=2)


def _settle_abandoned_claims(now) -> int:
    """A direct call whose process died mid-write leaves only its in-progress claim: settle it
    from the tool's receipt lookup, so a retry with the same key replays or runs again."""
    from agentops.models import IdempotencyRecord, IdempotencyStatus

    settled = 0
    stale = IdempotencyRecord.objects.filter(
        status=IdempotencyStatus.IN_PROGRESS, created_at__lt=now - ABANDONED_AFTER
    )
    for record in stale:
        if (
            Action.objects.filter(idempotency_key=record.key)
            .exclude(
                status__in=[
                    ActionStatus.SUCCEEDED,
                    ActionStatus.FAILED,
                    ActionStatus.REJECTED,
                    ActionStatus.CANCELLED,
                ]
            )
            .exists()
        ):
            continue  # a run's action owns it: its own reconciliation settles it
        spec = registry.get(record.tool)
        if spec is None or spec.lookup_receipt is None:
            continue
        lookup = spec.lookup_receipt(record.key)
        if lookup.status == ReceiptStatus.FOUND:
            idempotency_complete(key=record.key, response=success(lookup.receipt))
        elif lookup.status == ReceiptStatus.ABSENT:
            idempotency_release(key=record.key)
        else:
            continue
        log.warning("settled abandoned idempotency claim %s: %s", record.key, lookup.status.value)
        settled += 1
    return settled
