"""The navigation's approvals link and its count, for approvers only."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts.models import Role
from accounts.selectors import user_roles
from approvals.selectors import approvals_pending_count


def approvals_nav(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or Role.APPROVER not in user_roles(user=user):
        return {}
    return {"approvals_pending": approvals_pending_count(approver=user)}
