from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django import template

from bookings import rules

register = template.Library()


@register.filter
def equipment_list(names: Iterable[str]) -> str:
    """Equipment names as the active language lists their labels: `projector, video`."""
    return str(rules.equipment_list(names))


@register.filter
def iso_datetime(value: str) -> datetime | str:
    """An ISO 8601 text (as tool arguments carry it) as a datetime, for the date filter."""
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return value or ""
