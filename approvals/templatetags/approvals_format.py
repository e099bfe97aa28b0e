"""Show an intent's values as people read them: ISO datetimes in local time, lists joined."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils import formats, timezone

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
