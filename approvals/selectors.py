"""Approval reads."""

from __future__ import annotations

from typing import Any

from accounts.models import User
from approvals.models import ApprovalAudit, ApprovalRequest, RequestStatus


def approval_request_latest(*, action_ref: str) -> ApprovalRequest | None:
    return (
        ApprovalRequest.objects.filter(action_ref=action_ref)
        .select_related("record", "record__approver")
        .order_by("-created_at")
        .first()
    )


def approval_request_pending(*, request_id: Any) -> ApprovalRequest | None:
    return (
        ApprovalRequest.objects.filter(pk=request_id, status=RequestStatus.PENDING)
        .select_related("requester")
        .first()
    )


def approval_requests_of(*, requester: User, limit: int = 20) -> list[ApprovalRequest]:
    """A requester's own approval requests, newest first, with their decisions."""
    return list(
        ApprovalRequest.objects.filter(requester=requester)
        .select_related("record", "record__approver")
        .order_by("-created_at")[:limit]
    )


def approvals_pending(*, approver: User) -> list[ApprovalRequest]:
    """What an approver may decide: pending requests of others, soonest deadline first."""
    return list(
        ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
        .exclude(requester=approver)
        .select_related("requester")
        .order_by("deadline")
    )


def approvals_pending_count(*, approver: User) -> int:
    return (
        ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
        .exclude(requester=approver)
        .count()
    )


def approvals_stale() -> list[ApprovalRequest]:
    """Approved actions that drifted or expired and wait for a fresh approval."""
    fresh = ApprovalRequest.objects.filter(status=RequestStatus.PENDING).values("action_ref")
    return list(
        ApprovalRequest.objects.filter(status=RequestStatus.STALE)
        .exclude(action_ref__in=fresh)
        .select_related("requester", "record", "record__approver")
        .order_by("-decided_at")
    )


def approvals_decided(*, limit: int = 50) -> list[ApprovalRequest]:
    return list(
        ApprovalRequest.objects.exclude(status=RequestStatus.PENDING)
        .select_related("requester", "record", "record__approver")
        .order_by("-decided_at")[:limit]
    )


def approval_audit_for(*, request_id: Any) -> list[ApprovalAudit]:
    return list(ApprovalAudit.objects.filter(request_id=request_id).select_related("actor"))


def approval_pending_for_run(*, run_ref: str, approver: User) -> bool:
    """Whether a request of this run waits for a decision this approver may take (not their
    own): what lets an approver watch the run."""
    return (
        ApprovalRequest.objects.filter(run_ref=run_ref, status=RequestStatus.PENDING)
        .exclude(requester=approver)
        .exists()
    )


def approval_requests_for_run(*, run_ref: str) -> list[ApprovalRequest]:
    """Every approval request of one run (by the runtime's run reference), oldest first, with
    its signed record, approver and audit trail."""
    return list(
        ApprovalRequest.objects.filter(run_ref=run_ref)
        .select_related("requester", "record", "record__approver")
        .prefetch_related("audit__actor")
        .order_by("created_at")
    )
