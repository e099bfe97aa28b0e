"""The runtime's records in the Django admin: looked at, never written by hand (the runtime's
services write them; an operator settles an unclear write from the reconciliation queue)."""

from __future__ import annotations

from django.contrib import admin

from accounts.admin import ReadOnlyAdmin
from agentops.models import Action, AgentRun, IdempotencyRecord, TraceEvent


@admin.register(AgentRun)
class AgentRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "subject", "kind", "status", "outcome", "created_at", "finished_at")
    list_filter = ("status", "kind", "outcome")
    search_fields = ("id", "subject__username", "goal")
    list_select_related = ("subject",)
    date_hierarchy = "created_at"


@admin.register(Action)
class ActionAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "turn", "call_index", "tool", "status", "attempts", "created_at")
    list_filter = ("status", "tool", "readonly", "risk")
    search_fields = ("id", "run__id", "idempotency_key")
    list_select_related = ("run",)


@admin.register(TraceEvent)
class TraceEventAdmin(ReadOnlyAdmin):
    list_display = ("run", "seq", "kind", "action", "created_at")
    list_filter = ("kind",)
    search_fields = ("run__id",)
    list_select_related = ("run", "action")


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(ReadOnlyAdmin):
    list_display = ("key", "tool", "subject", "status", "created_at", "completed_at", "expires_at")
    list_filter = ("status", "tool")
    search_fields = ("key",)
    list_select_related = ("subject",)
