"""Show an intent's values as people read them: ISO datetimes in local time, lists joined."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django import template
from django.utils import formats, timezone
from django.utils.translation import gettext, gettext_lazy

from accounts.models import Department
from approvals.models import ApprovalAudit, AuditEvent

if TYPE_CHECKING:
    from django_stubs_ext import StrPromise

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


# Keyed by the stored value (a str: AuditEvent members are str, so they look up the same).
EVENT_WORDS: dict[str, StrPromise] = {
    AuditEvent.REQUESTED: gettext_lazy("Requested"),
    AuditEvent.APPROVED: gettext_lazy("Approved"),
    AuditEvent.REJECTED: gettext_lazy("Rejected"),
    AuditEvent.REFUSED: gettext_lazy("A decision was refused"),
    AuditEvent.EXPIRED: gettext_lazy("Expired: nobody decided in time"),
    AuditEvent.WITHDRAWN: gettext_lazy("Withdrawn"),
    AuditEvent.CONSUMED: gettext_lazy("The approval was used: it ran"),
    AuditEvent.NOT_VALID: gettext_lazy("The approval was not accepted when it was to run"),
    AuditEvent.REFRESH_REQUESTED: gettext_lazy("A fresh approval was asked for"),
}
# The audit's outcome codes (approvals' own), in words.
CODE_WORDS = {
    "cannot_succeed": gettext_lazy("it could no longer be done as requested"),
    "reason_required": gettext_lazy("no reason was given"),
    "self_approval": gettext_lazy("nobody approves their own request"),
    "not_an_approver": gettext_lazy("only approvers decide"),
    "already_decided": gettext_lazy("it was already decided"),
    "expired": gettext_lazy("its deadline had passed"),
    "not_found": gettext_lazy("no such request"),
    "not_yours": gettext_lazy("not the requester's own"),
    "not_stale": gettext_lazy("it did not need a fresh approval"),
    "approval_drifted": gettext_lazy("what it acts on had changed since it was approved"),
    "approval_expired": gettext_lazy("the approval had expired"),
    "approval_missing": gettext_lazy("there was no approval"),
    "nonce_replayed": gettext_lazy("the approval had already been used"),
    "bad_signature": gettext_lazy("the approval's signature did not verify"),
    "unknown_key": gettext_lazy("the approval was signed with an unknown key"),
    "not_approved": gettext_lazy("the signed decision was not an approval"),
}


@register.filter
def audit_words(entry: ApprovalAudit) -> str:
    """An approvals audit row as people read it: the event, and why (its code) in words."""
    event = EVENT_WORDS.get(entry.event, entry.event)
    if not entry.code:
        return str(event)
    return gettext("%(event)s: %(why)s") % {
        "event": event,
        "why": CODE_WORDS.get(entry.code, entry.code),
    }
