"""The navigation's admin links (audit log, drills), for admins only."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts.models import Role
from accounts.selectors import user_roles


def ops_nav(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or Role.ADMIN not in user_roles(user=user):
        return {}
    return {"ops_nav": True}
