"""Identity: the user model, its department, roles (groups) and API tokens.

Below every other app of ours: any app may import this one, this one imports none of them.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils.translation import gettext_lazy


class Department(models.TextChoices):
    ENGINEERING = "Engineering", gettext_lazy("Engineering")
    SALES = "Sales", gettext_lazy("Sales")


class Role(models.TextChoices):
    """Roles are Django groups of these names; read them with `selectors.user_roles`."""

    EMPLOYEE = "employees"
    APPROVER = "approvers"
    OPERATOR = "operators"
    ADMIN = "admins"
    # Not a permission: marks the drill identities, who see and book only sandbox resources
    # (bookings' sandbox rooms), so a drill never touches real bookings.
    SANDBOX = "sandbox"


class User(AbstractUser):
    employee_id = models.CharField(max_length=16, unique=True, null=True, blank=True)
    department = models.CharField(max_length=32, choices=Department.choices, blank=True)

    class Meta:
        verbose_name = gettext_lazy("user")
        verbose_name_plural = gettext_lazy("users")

    def __str__(self) -> str:
        return f"{self.username} ({self.employee_id})" if self.employee_id else self.username


class ApiToken(models.Model):
    """A bearer token for the JSON API. Only its SHA-256 is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, help_text="First characters, to recognise a token.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = gettext_lazy("API token")
        verbose_name_plural = gettext_lazy("API tokens")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @staticmethod
    def hash(raw: str) -> str:
        return hashlib.sha256(raw.encode()).hexdigest()

    @staticmethod
    def generate() -> str:
        return "ak_" + secrets.token_urlsafe(32)


class AuditAction(models.TextChoices):
    """What a human did. Tool calls are audited by the runtime's own rows (actions, trace); this
    log holds the decisions people take around them."""

    APPROVAL_APPROVED = "approval.approved", gettext_lazy("Approved an action")
    APPROVAL_REJECTED = "approval.rejected", gettext_lazy("Rejected an action")
    APPROVAL_REFRESHED = "approval.refreshed", gettext_lazy("Asked for a fresh approval")
    APPROVAL_WITHDRAWN = "approval.withdrawn", gettext_lazy("Withdrew an approval request")
    RECONCILE_ACCEPTED = "reconcile.accepted", gettext_lazy("Accepted a found receipt")
    RECONCILE_RETRIED = "reconcile.retried", gettext_lazy("Retried with the same key")
    RECONCILE_ABANDONED = "reconcile.abandoned", gettext_lazy("Abandoned an unclear write")
    ROLLBACK_RESOLVED = "rollback.resolved", gettext_lazy("Resolved a pending rollback")
    BOOKING_CANCELLED = "booking.cancelled", gettext_lazy("Cancelled a booking as an admin")
    # Written by the check-in sweeper, with the booking's owner as the actor (whose booking it
    # was) and "by": "check-in sweeper" in the detail: nobody pressed a button.
    BOOKING_RELEASED = "booking.released", gettext_lazy("A booking nobody checked in was released")
    TOKEN_ISSUED = "token.issued", gettext_lazy("Issued an API token")
    TOKEN_REVOKED = "token.revoked", gettext_lazy("Revoked an API token")
    ADMIN_CHANGED = "admin.changed", gettext_lazy("Changed a record in the admin")
    DRILL_RUN = "drill.run", gettext_lazy("Ran the drills")
    AUDIT_EXPORTED = "audit.exported", gettext_lazy("Exported the audit log")
    LOGIN_LOCKED = "login.locked", gettext_lazy("Sign-in locked after failed attempts")
    LOGIN_UNLOCKED = "login.unlocked", gettext_lazy("Unlocked a sign-in")


class AuditEntry(models.Model):
    """One human action, append-only. Written by `services.audit_record` in the same
    transaction as the change it describes.

    ``target`` names what was acted on as ``"<kind>:<id>"`` (``"booking:B204"``,
    ``"action:<uuid>"``, ``"token:ak_x1y2"``); ``run_id`` links it to an agent run when there is
    one. ``detail`` is a small JSON object (reason, note, before/after); free text in it is
    personal data and is redacted by exports unless asked for.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="audit_entries"
    )
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    target = models.CharField(max_length=120)
    run_id = models.UUIDField(null=True, blank=True, db_index=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = gettext_lazy("audit entry")
        verbose_name_plural = gettext_lazy("audit entries")
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["actor", "-at"]), models.Index(fields=["action", "-at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.target}"
