"""The navigation's reconciliation-queue link and its count, for operators and admins only."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from agentops.selectors import may_reconcile
from console.operators.sections import queue_count


def operators_nav(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not may_reconcile(user=user):
        return {}
    return {"operators_waiting": queue_count()}
