from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from agentops.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    readonly_fields = ("prefix", "digest", "created_at", "last_used_at")
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return (
            False  # tokens are issued with `manage.py issue_token`, which shows the raw value once
        )

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset) -> None:
        queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
