from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from accounts.models import ApiToken, User


@admin.register(User)
class EmployeeAdmin(UserAdmin):
    list_display = ("username", "employee_id", "department", "is_staff", "is_active")
    list_filter = ("department", "groups", "is_staff", "is_active")
    fieldsets = (*UserAdmin.fieldsets, ("Employee", {"fields": ("employee_id", "department")}))
    search_fields = ("username", "employee_id", "first_name", "last_name")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    readonly_fields = ("prefix", "digest", "created_at", "last_used_at")
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Tokens are issued with `manage.py issue_token`, which shows the raw value once.
        return False

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        """Revoke, and leave an admin log entry per token (a human action is audited)."""
        for token in queryset.filter(revoked_at__isnull=True):
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            self.log_change(request, token, "Revoked")
