"""The sweeper (Celery beat): finds work a dead worker or process left behind. Safe to run any
time, and twice at once: every change happens under the row locks, by status."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agentops.contract import Reason, ReceiptStatus, Signal, failure, success
from agentops.models import (
    OPEN_ACTION_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    IdempotencyRecord,
    IdempotencyStatus,
    McpHandle,
    RunStatus,
    TraceEvent,
)
from agentops.runtime import registry
from agentops.runtime.idempotency import idempotency_complete, idempotency_release
from agentops.runtime.kinds import kinds_where
from agentops.runtime.locks import lock_action, lock_run
from agentops.runtime.mcp_sessions import mcp_sessions_expire
from agentops.runtime.queue import enqueue_action, enqueue_reconcile, enqueue_step
from agentops.runtime.recorder import Called, finish_locked
from agentops.runtime.runs import action_approval_settled, advance
from agentops.runtime.saga import saga_resume
from agentops.runtime.timing import ABANDONED_CLAIM_AFTER, stale_after
from agentops.runtime.trace import trace_append
from approvals import services as approvals
from approvals.models import RequestStatus
from approvals.selectors import approval_request_latest
from approvals.services import approvals_close_overtaken, approvals_expire_due

# Requests still waiting for a human: pending, or stale until someone asks for a fresh one.
OPEN_REQUEST_STATUSES = frozenset({RequestStatus.PENDING, RequestStatus.STALE})

log = logging.getLogger(__name__)


def sweep() -> dict[str, int]:
    now = timezone.now()
    counts = {
        "expired_leases": _expire_leases(now),
        "reconciles": 0,
        "requeued": 0,
        "steps": 0,
    }
    for action_id in Action.objects.filter(status=ActionStatus.UNKNOWN_OUTCOME).values_list(
        "pk", flat=True
    ):
        counts["reconciles"] += 1
        with transaction.atomic():
            enqueue_reconcile(action_id)
    stale = now - stale_after()
    for action_id in Action.objects.filter(
        status=ActionStatus.QUEUED,
        created_at__lt=stale,
        run__status__in=[RunStatus.RUNNING, RunStatus.RECONCILING],
    ).values_list("pk", flat=True):
        counts["requeued"] += 1
        with transaction.atomic():
            enqueue_action(action_id)
    # An MCP session run has no model to step: its client sends the next call.
    idle = AgentRun.objects.filter(status=RunStatus.RUNNING, updated_at__lt=stale)
    for run in idle.filter(kind__in=kinds_where(swept=True)):
        if run.actions.filter(status__in=OPEN_ACTION_STATUSES).exists():
            continue
        counts["steps"] += 1
        if run.turn == 0 or not run.actions.filter(turn=run.turn).exists():
            with transaction.atomic():
                enqueue_step(run.pk, max(run.turn, 1))
        else:
            advance(run.pk, run.turn)
    counts["ended_sessions"] = mcp_sessions_expire(now=now)
    counts["rollbacks"] = 0
    for run_id in AgentRun.objects.filter(
        status=RunStatus.COMPENSATING, updated_at__lt=stale
    ).values_list("pk", flat=True):
        counts["rollbacks"] += 1
        with transaction.atomic():
            saga_resume(lock_run(run_id))
    counts["settled_claims"] = _settle_abandoned_claims(now)
    counts["expired_approvals"] = approvals_expire_due(now=now)
    counts["overtaken_approvals"] = approvals_close_overtaken()
    counts["decisions_resumed"] = _resume_decided(stale)
    IdempotencyRecord.objects.filter(expires_at__lt=now).delete()
    # A 2026-07-28 client's requestStates and tasks past their expiry answer nothing any more.
    counts["expired_mcp_handles"], _ = McpHandle.objects.filter(expires_at__lt=now).delete()
    return counts


def _resume_decided(stale: datetime) -> int:
    """A waiting action whose approval request a human (or the deadline) has closed, in a run
    that has not moved since: the message that would have resumed it was lost (a broker
    restarted without its data, a send that failed during an outage). Resume it from the
    decision; a duplicate of a message still on its way does nothing."""
    resumed = 0
    for action_id in Action.objects.filter(
        status=ActionStatus.WAITING_APPROVAL,
        run__status=RunStatus.WAITING_APPROVAL,
        run__updated_at__lt=stale,
    ).values_list("pk", flat=True):
        request = approval_request_latest(action_ref=str(action_id))
        if request is not None and request.status not in OPEN_REQUEST_STATUSES:
            resumed += 1
            action_approval_settled(action_id)
    return resumed


def _expire_leases(now: datetime) -> int:
    """A running action whose lease ran out: its worker died. A read runs again; a write's
    outcome is unknown and goes to reconciliation."""
    expired = 0
    for action_id in Action.objects.filter(
        status=ActionStatus.RUNNING, lease_expires_at__lt=now
    ).values_list("pk", flat=True):
        with transaction.atomic():
            locked = lock_action(action_id)
            if locked is None:
                continue
            run, action = locked
            if action.status != ActionStatus.RUNNING or action.lease_expires_at >= now:
                continue
            expired += 1
            trace_append(
                run=run,
                kind=EventKind.LEASE_EXPIRED,
                action=action,
                payload={"then": "requeued" if action.readonly else "reconcile"},
            )
            if action.readonly:
                finish_locked(
                    run,
                    action,
                    Called(
                        failure(
                            Reason.UNAVAILABLE,
                            "worker_lost",
                            "The worker stopped during this read.",
                            "It runs again.",
                        ),
                        Signal.YELLOW,
                    ),
                )
            else:
                finish_locked(
                    run,
                    action,
                    Called(
                        failure(
                            Reason.UNKNOWN_OUTCOME,
                            "worker_lost",
                            "The worker stopped in the middle of this write.",
                            "The host reconciles it.",
                        ),
                        Signal.UNKNOWN,
                    ),
                )
    return expired


def _settle_abandoned_claims(now: datetime) -> int:
    """A direct call whose process died mid-write leaves its in-progress claim: settle it from
    the tool's receipt lookup, so a retry with the same key replays or runs again."""
    settled = 0
    stale = IdempotencyRecord.objects.filter(
        status=IdempotencyStatus.IN_PROGRESS, created_at__lt=now - ABANDONED_CLAIM_AFTER
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


# Personal data in a finished run's record, in every copy the product keeps: the request text,
# the earlier turns it was read with, the reply, the trace payloads, its actions' parameters and
# results, and its approval requests' rendered intents. Past the retention they are blanked; the
# run, its actions (tool, status, key, the parameters' digest, timings), the event sequence and
# the approvals' signed bindings (which hold only digests) stay, so the log still says who did
# what and when, and what was approved can still be matched by its digest.
EXPIRED_GOAL = "[expired]"
EXPIRED_PAYLOAD = {"expired": True}
RETENTION_BATCH = 500


def trace_payloads_expire(*, now: datetime | None = None, max_batches: int = 100) -> dict[str, int]:
    """Blank the trace payloads and request text of runs finished more than
    ``settings.TRACE_PAYLOAD_RETENTION_DAYS`` ago (0 keeps them forever). Idempotent; a batch
    of runs per transaction."""
    days = settings.TRACE_PAYLOAD_RETENTION_DAYS
    counts = {"runs": 0, "events": 0, "actions": 0, "approvals": 0}
    if days <= 0:
        return counts
    cutoff = (now or timezone.now()) - timedelta(days=days)
    for _ in range(max_batches):
        with transaction.atomic():
            batch = list(
                AgentRun.objects.filter(finished_at__lt=cutoff)
                .exclude(goal=EXPIRED_GOAL)
                .values_list("pk", flat=True)[:RETENTION_BATCH]
            )
            if not batch:
                break
            counts["events"] += TraceEvent.objects.filter(run_id__in=batch).update(
                payload=EXPIRED_PAYLOAD
            )
            counts["actions"] += Action.objects.filter(run_id__in=batch).update(
                params=EXPIRED_PAYLOAD, result=EXPIRED_PAYLOAD
            )
            counts["approvals"] += approvals.approval_intents_expire(
                run_refs=[str(pk) for pk in batch]
            )
            counts["runs"] += AgentRun.objects.filter(pk__in=batch).update(
                goal=EXPIRED_GOAL, conversation=[], reply=""
            )
    return counts
