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
        """Revoke, and leave an admin log entry per token (a human action is audited)."""
        for token in queryset.filter(revoked_at__isnull=True):
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            self.log_change(request, token, "Revoked")
