"""Show an intent's values as people read them: ISO datetimes in local time, lists joined."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils import formats, timezone
from django.utils.translation import gettext

from accounts.models import Department

register = template.Library()


@register.filter
def department(value: str) -> str:
    """A department code as its label in the active language."""
    return str(Department(value).label) if value in Department.values else value


@register.filter
def intent_value(value: Any) -> str:
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
        if moment.tzinfo is not None:
            return formats.date_format(timezone.localtime(moment), "SHORT_DATETIME_FORMAT")
        return value
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


@register.filter
def intent_fields(intent: dict[str, Any]) -> list[tuple[str, Any]]:
    """An intent's arguments as (label, value): in the order and with the titles its snapshot
    carries (translated when the catalogue knows them), then any argument without a title."""
    params = intent.get("params") or {}
    labels = {
        str(pair[0]): str(pair[1])
        for pair in intent.get("labels") or []
        if isinstance(pair, list | tuple) and len(pair) == 2
    }
    ordered = [name for name in labels if name in params] + [n for n in params if n not in labels]
    return [(gettext(labels[name]) if name in labels else name, params[name]) for name in ordered]
