"""Small filters for the admins' screens."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.translation import gettext_lazy

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


# What a tool call did, in words (an unknown tool, e.g. a third-party MCP one, shows its name).
TOOL_WORDS = {
    "reserve_room": gettext_lazy("Book a room"),
    "cancel_booking": gettext_lazy("Cancel a booking"),
    "find_available_rooms": gettext_lazy("Look for free rooms"),
    "get_booking": gettext_lazy("Read a booking"),
    "list_my_bookings": gettext_lazy("List own bookings"),
}
# How a tool call ended, in words (the runtime's action statuses).
OUTCOME_WORDS = {
    "rejected": gettext_lazy("Refused"),
    "waiting_approval": gettext_lazy("Waiting for approval"),
    "queued": gettext_lazy("Queued"),
    "running": gettext_lazy("Running"),
    "succeeded": gettext_lazy("Done"),
    "failed": gettext_lazy("Failed"),
    "unknown_outcome": gettext_lazy("Outcome unknown"),
    "needs_human": gettext_lazy("Waiting for an operator"),
    "cancelled": gettext_lazy("Cancelled"),
}


@register.filter
def tool_words(name: str) -> str:
    return str(TOOL_WORDS.get(name, name))


@register.filter
def outcome_words(value: str) -> str:
    if value in OUTCOME_WORDS:
        return str(OUTCOME_WORDS[value])
    return audit_action_label(value)
