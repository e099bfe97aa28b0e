"""Approvers decide knowing the present: a request is re-checked against now (slot, room facts,
requester) on its card and detail page; an approval the write could no longer honour is refused
and writes nothing; when an approved call fails anyway, both sides read the true outcome."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import translation

from accounts.words import say
from agentops import tasks
from agentops.models import Action
from agentops.services import tool_call_governed
from approvals.models import ApprovalAudit, ApprovalRecord, ApprovalRequest, NonceUse
from approvals.selectors import (
    approval_card,
    approval_requests_of_with_outcomes,
    approvals_decided_with_outcomes,
)
from approvals.services import approval_decide
from bookings.models import Booking, Room
from bookings.services import booking_reserve
from config.celery import app
from tests.conftest import slot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]

START, END = slot(days=3, hour=10)
HALF = slot(days=3, hour=10, hours=1)[0], slot(days=3, hour=10, minute=30)[0]


@pytest.fixture(autouse=True)
def _no_leftover_tasks():
    """Tasks these tests leave in the broker (nobody consumes them here) must not reach a later
    test's worker."""
    yield
    app.control.purge()


def request_r12(user) -> ApprovalRequest:
    """e17 (Engineering) asks for R12 (Sales') on the booking screen: it waits for an approver."""
    envelope = tool_call_governed(
        user=user,
        name="reserve_room",
        arguments={
            "room_id": "R12",
            "start_at": START.isoformat(),
            "end_at": END.isoformat(),
            "attendees": 3,
            "expected_version": Room.objects.get(code="R12").schedule_version,
        },
        channel="web",
    )
    assert envelope["code"] == "approval_pending", envelope
    return ApprovalRequest.objects.get(status="pending")


def take_r12_first_half(user) -> Booking:
    return booking_reserve(
        user=user,
        room_code="R12",
        start_at=HALF[0],
        end_at=HALF[1],
        attendees=2,
        idempotency_key="e23-half",
    ).booking


def state() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT code, schedule_version FROM bookings_room ORDER BY code")
        versions = dict(cursor.fetchall())
    return {
        "bookings": Booking.objects.count(),
        "records": ApprovalRecord.objects.count(),
        "nonces": NonceUse.objects.count(),
        "versions": versions,
    }


def run_the_decision(request: ApprovalRequest) -> None:
    """What the worker does after a decision, inline: continue the run, then execute."""
    tasks.approval_settled_task(request.action_ref)
    action = Action.objects.get(pk=request.action_ref)
    if action.status == "queued":
        tasks.execute_action_task(str(action.pk), str(action.run_id))


def test_a_free_slot_reads_as_still_possible_in_people_s_words(e17):
    request = request_r12(e17)
    card = approval_card(request=request)
    assert card.problems == []
    with translation.override("en"):
        summary = say(request.intent["summary"])
        channel = say(request.intent["channel"])
    assert summary.startswith(f"Book {Room.objects.get(code='R12').name} (R12), ")
    assert f"{START:%a} {START.day} {START:%b %Y}, 10:00–11:00" in summary
    assert channel == "on the booking screen"


def test_approving_a_request_whose_slot_was_taken_is_refused_and_writes_nothing(e17, e23, approver):
    request = request_r12(e17)
    take_r12_first_half(e23)
    card = approval_card(request=request)
    with translation.override("en"):
        problems = [say(p) for p in card.problems]
    assert len(problems) == 1
    assert problems[0].startswith("R12 was taken meanwhile: another booking holds ")
    assert "10:00–10:30" in problems[0]
    before = state()

    refused = approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok")

    assert (refused.ok, refused.code) == (False, "cannot_succeed")
    assert "R12 was taken meanwhile" in refused.message
    assert state() == before
    request.refresh_from_db()
    assert request.status == "pending"
    audit = ApprovalAudit.objects.get(request=request, event="refused")
    assert (audit.actor, audit.code) == (approver, "cannot_succeed")
    assert audit.detail["problems"] == card.problems
    # Rejecting it stays possible, with the reason.
    assert approval_decide(
        request_id=request.pk, approver=approver, approve=False, reason="taken"
    ).ok


def test_an_approval_overtaken_by_a_booking_shows_nothing_was_booked_on_both_sides(
    e17, e23, approver
):
    request = request_r12(e17)
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    take_r12_first_half(e23)  # after the decision, before it ran
    run_the_decision(request)

    request.refresh_from_db()
    assert request.status == "approved"  # the decision stands; its drifted binding was refused
    assert Booking.objects.filter(requester=e17).count() == 0
    (row,) = approvals_decided_with_outcomes()
    (mine,) = approval_requests_of_with_outcomes(requester=e17)
    with translation.override("en"):
        for outcome in (say(row.outcome), say(mine.outcome)):
            assert outcome.startswith("Approved, but it did not run: R12 was taken meanwhile")
            assert outcome.endswith("Nothing was booked.")


def test_an_approved_call_that_fails_anyway_reads_as_failed_not_approved(e17, approver):
    request = request_r12(e17)
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    # An admin's edit of a fact the policy read, after the approval: its binding no longer
    # matches, so the approved call is refused before it runs (seed 002).
    Room.objects.filter(code="R12").update(bookable=False)
    run_the_decision(request)

    action = Action.objects.get(pk=request.action_ref)
    assert (action.status, action.result["code"]) == ("rejected", "approval_drifted")
    assert Booking.objects.count() == 0
    (row,) = approvals_decided_with_outcomes()
    assert row.state == "not_run"
    with translation.override("en"):
        assert (
            say(row.outcome)
            == "Approved, but it did not run: R12 can no longer be booked. Nothing was booked."
        )
    with translation.override("zh-hans"):
        assert "没有预订任何会议室" in say(row.outcome)


def test_a_successful_approval_reads_as_done(e17, approver):
    request = request_r12(e17)
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    run_the_decision(request)
    (row,) = approvals_decided_with_outcomes()
    assert row.state == "done"
    assert Booking.objects.filter(requester=e17, room__code="R12").count() == 1


def test_a_chinese_approver_reads_reasons_and_findings_in_chinese(e17, e23, approver):
    request = request_r12(e17)
    take_r12_first_half(e23)
    client = Client(headers={"accept-language": "zh-hans"})
    client.force_login(approver)

    inbox = client.get(reverse("approvals:inbox")).content.decode()
    detail = client.get(reverse("approvals:detail", args=[request.pk])).content.decode()

    for page in (inbox, detail):
        assert "R12 属于销售部，而不是研发部" in page
        assert "R12 在此期间已被占用" in page
        assert "在预订页面上" in page
        assert "belongs to" not in page and "taken meanwhile" not in page
        assert "reserve_room" not in page and "Schedule version seen" not in page


def test_the_detail_page_shows_the_history_and_is_not_for_other_employees(e17, e23, approver):
    request = request_r12(e17)
    approval_decide(request_id=request.pk, approver=approver, approve=False, reason="not now")
    client = Client()
    client.force_login(approver)
    page = client.get(reverse("approvals:detail", args=[request.pk])).content.decode()
    assert "Requested" in page and "Rejected" in page and "not now" in page
    client.force_login(e17)
    assert client.get(reverse("approvals:detail", args=[request.pk])).status_code == 200
    client.force_login(e23)
    assert client.get(reverse("approvals:detail", args=[request.pk])).status_code == 404
