"""Small filters for the admins' screens."""

from __future__ import annotations

import json
from typing import Any

from django import template

from accounts.models import AuditAction

register = template.Library()


@register.filter
def get_item(mapping: dict[str, Any] | None, key: str) -> Any:
    return (mapping or {}).get(key)


@register.filter
def audit_action_label(value: str) -> str:
    try:
        return str(AuditAction(value).label)
    except ValueError:
        return value


@register.filter
def as_json(value: Any) -> str:
    """Readable JSON for a <pre>: keys sorted, non-ASCII kept (escaped by the template)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2, default=str)
