"""Telling the requester what became of a request: the approvals' decisions (approved,
rejected, expired: ``approvals.signals.approval_settled``) and the run's end (failed after an
approval: ``agentops.contract.on_run_finished``). Subscribed in BookingsConfig.ready; both
arrive after the deciding commit."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.formats import date_format

from accounts.models import User
from approvals.models import ApprovalRequest, RequestStatus
from bookings.notices import Notice, notify

_DECIDED = {
    RequestStatus.APPROVED: Notice.APPROVED,
    RequestStatus.REJECTED: Notice.REJECTED,
    RequestStatus.EXPIRED: Notice.EXPIRED,
}


def _what(intent: dict[str, Any]) -> str:
    """The request in the reader's words: room and local start (no tool names)."""
    params = intent.get("params") or {}
    start = parse_datetime(str(params.get("start_at") or ""))
    when = date_format(timezone.localtime(start), "SHORT_DATETIME_FORMAT") if start else ""
    return f"{params.get('room_id') or ''} {when}".strip()


def on_approval_settled(sender: Any, request: ApprovalRequest, **kwargs: Any) -> None:
    notice = _DECIDED.get(RequestStatus(request.status))
    requester = User.objects.filter(pk=request.requester_id).first()
    if requester is None:
        return
    if notice is None:  # withdrawn: the person did it; their pages still refresh
        notify(user=requester, notice=Notice.BOOKED)
        return
    record = getattr(request, "record", None) if notice != Notice.EXPIRED else None
    notify(
        user=requester,
        notice=notice,
        what=_what(request.intent),
        reason=record.reason if record is not None else "",
    )


def on_run_finished(finished: dict[str, Any]) -> None:
    """A run that failed after its approval was given tells its requester so; any other
    ending of a run with a subject refreshes their open My bookings."""
    subject = User.objects.filter(pk=finished.get("subject_id")).first()
    if subject is None:
        return
    approved = None
    if finished.get("status") != "succeeded":
        approved = ApprovalRequest.objects.filter(
            run_ref=finished.get("run_id"), status=RequestStatus.APPROVED
        ).first()
    if approved is None:
        notify(user=subject, notice=Notice.BOOKED)
        return
    notify(
        user=subject,
        notice=Notice.FAILED_AFTER_APPROVAL,
        what=_what(approved.intent),
        reason=finished.get("reply") or "",
    )
