from __future__ import annotations

from collections.abc import Iterable

from django import template

from bookings import rules

register = template.Library()


@register.filter
def equipment_list(names: Iterable[str]) -> str:
    """Equipment names as the active language lists their labels: `projector, video`."""
    return str(rules.equipment_list(names))
