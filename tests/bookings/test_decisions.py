"""The requester is told: every decision by e-mail and on their open My bookings (the user's
channel group), and the approval deadline follows the booking. Through a real worker."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core import mail
from django.utils import timezone

from agentops.contract import broadcast_listen, run_finished_announce
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from bookings.models import Booking, BookingSeries
from bookings.notices import user_group
from bookings.series import SeriesMode, series_request
from tests.conftest import slot
from tests.workers import wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


@pytest.fixture
def e17_mail(e17):
    e17.email = "e17@example.com"
    e17.save(update_fields=["email"])
    return e17


def ask_r16(user, days=2):
    start, end = slot(days=days)
    outcome = series_request(
        user=user,
        room_code="R16",
        start_at=start,
        end_at=end,
        rule="FREQ=WEEKLY;COUNT=2",
        attendees=3,
        mode=SeriesMode.ALL,
        idempotency_key=str(uuid.uuid4()),
    )
    assert outcome.kind == "pending"
    return start, ApprovalRequest.objects.get(action_ref=outcome.value["action_id"])


class Listener:
    """A channel in the user's group, as an open My bookings page has."""

    def __init__(self, user):
        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        # As My bookings' consumer does: listened to first, then joined (pokes go only to
        # groups someone listens to).
        broadcast_listen(user_group(user.pk), self.channel)
        async_to_sync(self.layer.group_add)(user_group(user.pk), self.channel)

    def notices(self) -> list[str]:
        got = []
        while True:
            try:
                message = async_to_sync(self._receive)()
            except TimeoutError:
                return got
            got.append(message["notice"])

    async def _receive(self):
        import asyncio

        return await asyncio.wait_for(self.layer.receive(self.channel), timeout=1)


def test_the_deadline_is_a_lead_before_the_start(transactional_db, e17):
    start, request = ask_r16(e17, days=2)
    assert request.deadline == start - timedelta(minutes=15)


def test_the_deadline_of_a_far_booking_is_capped(transactional_db, e17):
    before = timezone.now()
    _start, request = ask_r16(e17, days=10)
    assert before + timedelta(hours=72) <= request.deadline <= timezone.now() + timedelta(hours=72)


def test_an_approval_is_mailed_and_pushed_and_the_series_booked(worker, e17_mail, approver):
    listener = Listener(e17_mail)
    _start, request = ask_r16(e17_mail)
    decided = approval_decide(request_id=request.pk, approver=approver, approve=True, reason="fine")
    assert decided.ok, decided
    run = wait_for_run(request.run_ref)
    assert run.status == "succeeded", (run.outcome, run.reply)
    assert Booking.objects.filter(series=BookingSeries.objects.get()).count() == 2
    approved = wait_until(
        lambda: [m for m in mail.outbox if m.to == ["e17@example.com"]], message="the e-mail"
    )
    assert [m.subject.split(":")[0] for m in approved] == ["Approved"]
    assert "R16" in approved[0].subject
    assert "fine" in approved[0].body
    notices = listener.notices()
    assert "approved" in notices
    assert "booked" in notices  # the run's end refreshes the page again


def test_a_rejection_is_mailed_with_the_reason_and_nothing_booked(worker, e17_mail, approver):
    _start, request = ask_r16(e17_mail)
    assert approval_decide(
        request_id=request.pk, approver=approver, approve=False, reason="board meeting"
    ).ok
    wait_for_run(request.run_ref)
    rejected = wait_until(
        lambda: [m for m in mail.outbox if m.to == ["e17@example.com"]], message="the e-mail"
    )
    assert [m.subject.split(":")[0] for m in rejected] == ["Not approved"]
    assert "board meeting" in rejected[0].body
    assert not Booking.objects.exists()


def test_a_run_that_fails_after_its_approval_says_so(worker, e17_mail, approver):
    _start, request = ask_r16(e17_mail)
    approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok")
    wait_for_run(request.run_ref)
    wait_until(lambda: mail.outbox, message="the approval's e-mail")
    mail.outbox.clear()
    run_finished_announce(
        {
            "run_id": request.run_ref,
            "subject_id": e17_mail.pk,
            "status": "failed",
            "outcome": "call_failed",
            "reply": "Someone booked R16 meanwhile; nothing was booked.",
        }
    )
    wait_until(lambda: mail.outbox, message="the failure's e-mail")
    assert [m.subject.split(":")[0] for m in mail.outbox] == ["Approved, but not booked"]
    assert "meanwhile" in mail.outbox[0].body
