"""Approval requests and signed records in the Django admin: evidence, looked at only (decisions
are made in the approvals inbox, signed by the service)."""

from __future__ import annotations

from django.contrib import admin

from accounts.admin import ReadOnlyAdmin
from approvals.models import ApprovalAudit, ApprovalRecord, ApprovalRequest


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    list_display = ("id", "requester", "status", "deadline", "created_at", "decided_at")
    list_filter = ("status",)
    search_fields = ("id", "action_ref", "run_ref", "requester__username")
    list_select_related = ("requester",)


@admin.register(ApprovalRecord)
class ApprovalRecordAdmin(ReadOnlyAdmin):
    list_display = ("request", "decision", "approver", "key_id", "expires_at", "created_at")
    list_filter = ("decision", "key_id")
    list_select_related = ("request", "approver")


@admin.register(ApprovalAudit)
class ApprovalAuditAdmin(ReadOnlyAdmin):
    list_display = ("at", "request", "actor", "event", "code")
    list_filter = ("event",)
    list_select_related = ("request", "actor")
