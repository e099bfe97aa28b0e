"""Human decisions on high-risk actions. An action is known here only by opaque references and
a binding (what exactly was approved, against which state); never by importing the runtime."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy


class RequestStatus(models.TextChoices):
    PENDING = "pending", gettext_lazy("Waiting")
    APPROVED = "approved", gettext_lazy("Approved")
    REJECTED = "rejected", gettext_lazy("Rejected")
    EXPIRED = "expired", gettext_lazy("Expired")  # nobody decided before the deadline
    # the requester took it back, or the run ended
    WITHDRAWN = "withdrawn", gettext_lazy("Withdrawn")
    # Approved, but drifted or expired before it could run: kept as evidence; only a fresh
    # approval of the same intent against the current state un-freezes the action.
    STALE = "stale", gettext_lazy("Needs a fresh approval")
    # Still waiting when what it acts on changed so that it can never run as asked (someone
    # else took the slot, its time began): closed and its requester told, not left waiting.
    OVERTAKEN = "overtaken", gettext_lazy("No longer possible")


class Decision(models.TextChoices):
    APPROVE = "approve"
    REJECT = "reject"


class ApprovalRequest(models.Model):
    """One high-risk action waiting for a human: the exact intent, rendered, and its binding."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    action_ref = models.CharField(max_length=64)
    run_ref = models.CharField(max_length=64)
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approval_requests"
    )
    binding = models.JSONField(help_text="What is approved, against which state (canonical).")
    intent = models.JSONField(help_text="The exact intent, rendered for humans.")
    status = models.CharField(
        max_length=16, choices=RequestStatus.choices, default=RequestStatus.PENDING
    )
    deadline = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # When the approvers were mailed about it (with the others of its window); empty: not yet.
    mailed_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        verbose_name = gettext_lazy("approval request")
        verbose_name_plural = gettext_lazy("approval requests")
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["action_ref"],
                condition=Q(status="pending"),
                name="one_pending_request_per_action",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.intent.get('tool', '?')} for {self.requester} ({self.status})"


class ApprovalRecord(models.Model):
    """A decision, signed with HMAC-SHA256 under a key id over the canonical binding, a nonce
    and an absolute expiry. One per request: the database refuses a second decision."""

    request = models.OneToOneField(ApprovalRequest, on_delete=models.PROTECT, related_name="record")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approval_decisions"
    )
    reason = models.TextField()
    payload = models.JSONField(help_text="Exactly what was signed.")
    key_id = models.CharField(max_length=32)
    signature = models.CharField(max_length=64)
    nonce = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = gettext_lazy("signed approval")
        verbose_name_plural = gettext_lazy("signed approvals")

    def __str__(self) -> str:
        return f"{self.decision} by {self.approver}"


class NonceUse(models.Model):
    """A signed approval authorises one action once: its nonce is consumed by a unique row."""

    nonce = models.CharField(max_length=64, unique=True)
    action_ref = models.CharField(max_length=64)
    used_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = gettext_lazy("used approval nonce")
        verbose_name_plural = gettext_lazy("used approval nonces")

    def __str__(self) -> str:
        return self.nonce


class AuditEvent(models.TextChoices):
    REQUESTED = "requested"
    APPROVED = "approved"
    REJECTED = "rejected"
    REFUSED = "refused"  # a decision attempt that was not allowed
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"
    OVERTAKEN = "overtaken"  # closed: it could no longer run as asked
    CONSUMED = "consumed"  # an approval authorised its execution
    NOT_VALID = "not_valid"  # an approval failed verification at execution
    REFRESH_REQUESTED = "refresh_requested"  # an approver asked for a fresh approval


class ApprovalAudit(models.Model):
    """Every human action on approvals and every verification, refusals included."""

    request = models.ForeignKey(
        ApprovalRequest, null=True, blank=True, on_delete=models.PROTECT, related_name="audit"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    event = models.CharField(max_length=24, choices=AuditEvent.choices)
    code = models.CharField(max_length=40, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = gettext_lazy("approval audit entry")
        verbose_name_plural = gettext_lazy("approval audit entries")
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.event} {self.code}"
