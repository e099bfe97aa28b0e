"""Identity in the Django admin, and the two shapes every admin of ours takes:

- ``ReadOnlyAdmin``: records a service writes (runs, actions, traces, approvals, the audit log)
  are looked at here, never added, edited or deleted by hand;
- ``AuditedAdmin``: what the admin may change is audited (``AuditAction.ADMIN_CHANGED``) in the
  same transaction as the change (Django runs each change form in one transaction).

Both refuse an action whose selection is not a list of primary keys with a 400 (``SafeActions``).
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import BadRequest, ValidationError
from django.db import transaction
from django.db.models import Model, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, ngettext

from accounts.forms import ThrottledAdminAuthenticationForm
from accounts.models import ApiToken, AuditAction, AuditEntry, User
from accounts.services import audit_record, login_unlock_by
from accounts.views import throttled_response

# Never copied into the audit log, even as "before/after": only their names.
SECRET_FIELDS = frozenset({"password", "password1", "password2", "usable_password", "digest"})


class SafeActions(admin.ModelAdmin):
    """An action POST whose ``_selected_action`` holds what is not a primary key is a tampered
    form: a 400, where Django's filter raised ValueError (a 500)."""

    def response_action(
        self, request: HttpRequest, queryset: QuerySet, *args: Any, **kwargs: Any
    ) -> Any:
        pk = self.model._meta.pk
        try:
            for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
                pk.get_prep_value(pk.to_python(value))
        except (ValidationError, ValueError, TypeError, OverflowError) as exc:
            raise BadRequest("The selection is not a list of records.") from exc
        return super().response_action(request, queryset, *args, **kwargs)


class ReadOnlyAdmin(SafeActions):
    """View only: no add, change or delete, for anybody (superusers included)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def _shown(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Model):
        return str(value.pk)
    if isinstance(value, QuerySet | list | tuple | set):
        return sorted(str(v.pk if isinstance(v, Model) else v) for v in value)
    return str(value)


def admin_user(request: HttpRequest) -> User:
    """The signed-in user of an admin page: the admin site lets in only active staff
    (``AdminSite.has_permission``), so never the anonymous user."""
    return cast(User, request.user)


class AuditedAdmin[M: Model](SafeActions):
    """Each add or change leaves an ``admin.changed`` audit entry naming the changed fields with
    their values before and after (secrets only by name). ``M`` is the model administered (for
    the type checker only)."""

    audit_kind = ""  # the target's kind in the audit log, e.g. "room"

    def audit_target(self, obj: M) -> str:
        return f"{self.audit_kind or obj._meta.model_name}:{obj.pk}"

    def save_changes(self, request: HttpRequest, obj: M, form: ModelForm, change: bool) -> None:
        """Write the object (override to write less than every field)."""
        super().save_model(request, obj, form, change)

    def save_model(self, request: HttpRequest, obj: M, form: ModelForm, change: bool) -> None:
        before = {name: _shown(form.initial.get(name)) for name in form.changed_data}
        self.save_changes(request, obj, form, change)
        changed: dict[str, Any] = {}
        for name in form.changed_data:
            if name in SECRET_FIELDS:
                changed[name] = "(changed)"
            else:
                after = _shown(form.cleaned_data.get(name))
                if after != before[name]:  # some widgets report an unchanged value as changed
                    changed[name] = [before[name], after]
        audit_record(
            actor=admin_user(request),
            action=AuditAction.ADMIN_CHANGED,
            target=self.audit_target(obj),
            detail={"model": obj._meta.label, "added": not change, "changed": changed},
        )

    def delete_model(self, request: HttpRequest, obj: M) -> None:
        target = self.audit_target(obj)
        super().delete_model(request, obj)
        audit_record(
            actor=admin_user(request),
            action=AuditAction.ADMIN_CHANGED,
            target=target,
            detail={"model": obj._meta.label, "deleted": True},
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[M]) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(User)
class EmployeeAdmin(AuditedAdmin[User], UserAdmin):
    list_display = ("username", "employee_id", "department", "is_staff", "is_active")
    list_filter = ("department", "groups", "is_staff", "is_active")
    # UserAdmin sets its fieldsets; the stubs type the attribute as optional.
    fieldsets = (
        *UserAdmin.fieldsets,  # type: ignore[misc]
        ("Employee", {"fields": ("employee_id", "department")}),
    )
    search_fields = ("username", "employee_id", "first_name", "last_name")
    audit_kind = "user"
    actions = ["unlock_sign_in"]

    def has_unlock_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    @admin.action(description=gettext_lazy("Unlock sign-in"), permissions=["unlock"])
    def unlock_sign_in(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        """Lift the sign-in lock of each selected person, each with its audit entry."""
        users = list(queryset)
        for user in users:
            login_unlock_by(actor=admin_user(request), user=user)
        self.message_user(
            request,
            ngettext(
                "Sign-in unlocked for %(n)d person.",
                "Sign-in unlocked for %(n)d people.",
                len(users),
            )
            % {"n": len(users)},
            messages.SUCCESS,
        )

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # People own runs, bookings and audit entries (protected): deactivate them instead.
        return False


admin.site.unregister(Group)


@admin.register(Group)
class RoleAdmin(AuditedAdmin[Group], GroupAdmin):
    audit_kind = "group"


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    fields = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]
    # Tokens are issued with `manage.py issue_token` (it shows the raw value once) and revoked
    # with the action below; the digest is never shown.

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff

    @admin.action(description=gettext_lazy("Revoke selected tokens"), permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        """Revoke, each with its audit entry in the same transaction."""
        done = 0
        with transaction.atomic():
            for token in queryset.select_for_update().filter(revoked_at__isnull=True):
                token.revoked_at = timezone.now()
                token.save(update_fields=["revoked_at"])
                audit_record(
                    actor=admin_user(request),
                    action=AuditAction.TOKEN_REVOKED,
                    target=f"token:{token.prefix}",
                    detail={"user": token.user.get_username(), "name": token.name},
                )
                self.log_change(request, token, "Revoked")
                done += 1
        self.message_user(
            request,
            ngettext("%(n)d token revoked.", "%(n)d tokens revoked.", done) % {"n": done}
            if done
            else gettext("Nothing to revoke: the selected tokens were revoked already."),
            messages.SUCCESS if done else messages.WARNING,
        )


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "action", "target", "run_id")
    list_filter = ("action",)
    search_fields = ("target", "actor__username", "run_id")
    list_select_related = ("actor",)
    date_hierarchy = "at"


# /admin/login/ is throttled as the site's sign-in is: the same form rules, the same statuses.
admin.site.login_form = ThrottledAdminAuthenticationForm
_admin_login = admin.site.login


def _throttled_admin_login(request: HttpRequest, extra_context: dict | None = None) -> Any:
    return throttled_response(request, _admin_login(request, extra_context))


# Shadowing the bound method on the one site instance, on purpose (no AdminSite subclass).
admin.site.login = _throttled_admin_login  # type: ignore[method-assign]
