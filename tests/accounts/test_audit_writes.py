"""Every human decision leaves one row in the product-wide audit log (accounts.AuditEntry), in
the same transaction as the change: approvals' decisions, refreshes and withdrawals, and token
issues. A refused decision changes nothing and records no decision."""

from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from accounts.models import ApiToken, AuditAction, AuditEntry
from accounts.services import token_issue
from approvals.models import ApprovalRequest, RequestStatus
from approvals.services import approval_decide, approval_refresh, approval_withdraw

pytestmark = pytest.mark.django_db

RUN = uuid.uuid4()


@pytest.fixture
def pending(e17):
    return ApprovalRequest.objects.create(
        action_ref="a1",
        run_ref=str(RUN),
        requester=e17,
        binding={"run": str(RUN)},
        intent={"tool": "reserve_room"},
        deadline=timezone.now() + timedelta(minutes=30),
    )


@pytest.mark.parametrize(
    ("approve", "action"),
    [(True, AuditAction.APPROVAL_APPROVED), (False, AuditAction.APPROVAL_REJECTED)],
)
def test_a_decision_is_audited_with_its_reason_and_run(pending, approver, approve, action):
    assert approval_decide(
        request_id=pending.pk, approver=approver, approve=approve, reason="Board"
    ).ok

    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.target) == (approver, action, "action:a1")
    assert entry.run_id == RUN
    assert entry.detail == {"request": str(pending.pk), "reason": "Board"}


def test_a_refused_decision_is_not_a_decision(pending, e17):
    assert not approval_decide(request_id=pending.pk, approver=e17, approve=True, reason="x").ok
    assert not AuditEntry.objects.exists()
    assert ApprovalRequest.objects.get().status == RequestStatus.PENDING


def test_a_withdrawal_is_audited(pending, e17):
    assert approval_withdraw(request_id=pending.pk, user=e17).ok
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.run_id) == (e17, AuditAction.APPROVAL_WITHDRAWN, RUN)


def test_a_refresh_is_audited(pending, approver):
    ApprovalRequest.objects.filter(pk=pending.pk).update(status=RequestStatus.STALE)
    assert approval_refresh(request_id=pending.pk, approver=approver).ok
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action) == (approver, AuditAction.APPROVAL_REFRESHED)


def test_a_token_issue_is_audited_without_the_token(e17, admin_user):
    raw = token_issue(user=e17, name="laptop", actor=admin_user)
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action) == (admin_user, AuditAction.TOKEN_ISSUED)
    assert entry.target == f"token:{ApiToken.objects.get().prefix}"
    assert entry.detail == {"user": "e17", "name": "laptop"}
    assert raw not in str(entry.detail) + entry.target


def test_the_issue_token_command_audits_who_issued_it(e17, admin_user):
    call_command("issue_token", "e17", "--by", "admin", stdout=StringIO())
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.detail["user"]) == (admin_user, "e17")
