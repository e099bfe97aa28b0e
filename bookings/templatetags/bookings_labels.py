from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from django import template
from django.utils.translation import gettext

from accounts.models import Department
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


@register.filter
def reasons_text(reasons: Iterable[tuple[str, dict]]) -> str:
    """Why a room waits for an approver ((msgid, params) pairs), in the reader's language: a
    department by its label (the stored value is an English name)."""
    return " ".join(gettext(msgid) % _labelled(params) for msgid, params in reasons)


def _labelled(params: dict) -> dict:
    department = params.get("department")
    if department in Department.values:
        return params | {"department": Department(department).label}
    return params


@register.simple_tag
def fresh_key() -> str:
    """A new idempotency key for one rendered form: its double submit acts once."""
    return uuid.uuid4().hex
