"""Telling the requester what became of a request: that it waits
(``approvals.signals.approval_opened``), the approvals' decisions (approved, rejected, expired:
``approvals.signals.approval_settled``) and the run's end (failed after an approval:
``agentops.contract.on_run_finished``). Subscribed in BookingsConfig.ready; each arrives after
the commit that did it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone, translation
from django.utils.dateparse import parse_datetime
from django.utils.formats import date_format

from accounts.words import say
from approvals.models import ApprovalRequest, RequestStatus
from approvals.selectors import approval_overtaken_problems, approval_request_with_record
from bookings.notices import Notice, notify, push_changed

_DECIDED = {
    RequestStatus.APPROVED: Notice.APPROVED,
    RequestStatus.REJECTED: Notice.REJECTED,
    RequestStatus.EXPIRED: Notice.EXPIRED,
    RequestStatus.OVERTAKEN: Notice.OVERTAKEN,
}


def _what(intent: dict[str, Any]) -> str:
    """The request in the reader's words: room and local start (no tool names)."""
    params = intent.get("params") or {}
    start = parse_datetime(str(params.get("start_at") or ""))
    when = date_format(timezone.localtime(start), "SHORT_DATETIME_FORMAT") if start else ""
    return f"{params.get('room_id') or ''} {when}".strip()


def on_approval_opened(sender: Any, request: ApprovalRequest, **kwargs: Any) -> None:
    """Sent after the commit that opened a request: the requester's open My bookings pages
    show it among the requests that need approval at once (a poke, no query, no e-mail)."""
    push_changed(user_id=request.requester_id, notice=Notice.REQUESTED)


def on_approval_settled(sender: Any, request: ApprovalRequest, **kwargs: Any) -> None:
    """Sent after commit on whatever thread decided (a web request, the sweeper, an MCP
    session's thread): the live poke at once, without a query; the e-mail from a worker
    (decision_mail_task), which reads the request afresh."""
    notice = _DECIDED.get(RequestStatus(request.status), Notice.BOOKED)
    push_changed(user_id=request.requester_id, notice=notice)
    if notice != Notice.BOOKED:
        from bookings.tasks import decision_mail_task

        decision_mail_task.delay(str(request.pk))


def decision_mail(*, request_id: str) -> None:
    """E-mail the requester the decision on ``request_id`` (approved, rejected, expired)."""
    request = approval_request_with_record(request_id=request_id)
    if request is None:
        return
    notice = _DECIDED.get(RequestStatus(request.status))
    if notice is None:
        return
    record = getattr(request, "record", None) if notice != Notice.EXPIRED else None
    reason = record.reason if record is not None else ""
    if notice == Notice.OVERTAKEN:
        with translation.override(settings.LANGUAGE_CODE):
            reason = " ".join(say(p) for p in approval_overtaken_problems(request=request))
    notify(user=request.requester, notice=notice, what=_what(request.intent), reason=reason)


def on_run_finished(finished: dict[str, Any]) -> None:
    """Called after the commit that ended a run, on whatever thread ended it: the live poke at
    once, without a query; a run that did not succeed is looked at by a worker
    (run_failed_mail_task): if it had been approved, its requester hears that it failed."""
    subject_id = finished.get("subject_id")
    if subject_id is None:
        return
    push_changed(user_id=subject_id, notice=Notice.BOOKED)
    if finished.get("status") != "succeeded":
        from bookings.tasks import run_failed_mail_task

        run_failed_mail_task.delay(str(finished.get("run_id")), finished.get("reply") or "")


def run_failed_mail(*, run_id: str, reply: str) -> None:
    """A run that ended without success after its approval was given: tell its requester."""
    approved = (
        ApprovalRequest.objects.select_related("requester")
        .filter(run_ref=run_id, status=RequestStatus.APPROVED)
        .first()
    )
    if approved is None:
        return
    notify(
        user=approved.requester,
        notice=Notice.FAILED_AFTER_APPROVAL,
        what=_what(approved.intent),
        reason=reply,
    )
