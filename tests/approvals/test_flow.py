"""Approvals end to end through a real worker: a HIGH run waits, a human decides, the run goes
on from the decision; nobody deciding ends it honestly. Every refused attempt writes nothing
but its audit row."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from agentops.contract import message_text
from agentops.models import Action
from agentops.runtime import sweeper
from agentops.runtime.runs import run_cancel, run_start
from approvals.models import ApprovalAudit, ApprovalRecord, ApprovalRequest, NonceUse
from approvals.selectors import approval_card
from approvals.services import approval_decide
from bookings.models import Booking, Room
from bookings.selectors import room_window_version
from bookings.services import booking_cancel, booking_reserve
from tests.conftest import slot
from tests.workers import wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=3, hour=14)
REQUEST = f"book R16 on {START:%Y-%m-%d} 14:00-15:00 for 3 people"


def change_r16(user) -> None:
    """The window the request acts on changes (another person books it and cancels again): it
    is free, but no longer as it was when the approval was asked."""
    booking = booking_reserve(
        user=user,
        room_code="R16",
        start_at=START,
        end_at=END,
        attendees=2,
        idempotency_key="other",
    ).booking
    booking_cancel(user=user, booking_code=booking.code)


def book_r16_another_day(user) -> None:
    """Another day of R16 is booked: the room's schedule version moves on, this window's not."""
    other_start, other_end = slot(days=4, hour=9)
    booking_reserve(
        user=user,
        room_code="R16",
        start_at=other_start,
        end_at=other_end,
        attendees=2,
        idempotency_key="other-day",
    )


def r16_arguments() -> dict:
    return {
        "room_id": "R16",
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": 3,
        "expected_version": Room.objects.get(code="R16").schedule_version,
    }


def waiting_run(user):
    run = wait_for_run(
        run_start(user=user, request_text=REQUEST).pk, statuses=("waiting_approval", "failed")
    )
    assert run.status == "waiting_approval", (run.outcome, run.reply)
    return run, ApprovalRequest.objects.get(run_ref=str(run.pk))


def test_the_request_shows_the_exact_intent_and_binding(worker, e17):
    _run, request = waiting_run(e17)
    action = Action.objects.get(pk=request.action_ref)
    assert request.status == "pending"
    assert request.intent["tool"] == "reserve_room"
    assert request.intent["params"]["room_id"] == "R16"
    assert request.intent["labels"][:3] == [
        ["room_id", "Room"],
        ["start_at", "Start"],
        ["end_at", "End"],
    ]
    assert request.intent["subject"] == "E17"
    # Stored as message ids with parameters (rendered in the reader's language), English for the API
    assert {
        "msgid": "%(room)s is a premium room that needs approval",
        "params": {"room": "R16"},
    } in (request.intent["risk_reasons"])
    assert "R16 is a premium room that needs approval" in map(
        message_text, request.intent["risk_reasons"]
    )
    assert request.binding["action"] == str(action.pk)
    assert request.binding["idempotency_key"] == action.idempotency_key
    # The version of the window it acts on, not of the whole room (DESIGN.md: a window is the
    # unit of truth).
    assert request.binding["environment_version"] == room_window_version(
        code="R16", windows=[(START, END)]
    )
    assert request.binding["policy_facts"] == {
        "room": "R16",
        "facts": {
            "requires_approval": True,
            "department": "Sales",
            "capacity": 16,
            "bookable": True,
        },
    }
    assert set(request.binding) == {
        "run",
        "action",
        "policy_version",
        "idempotency_key",
        "intent_digest",
        "environment_version",
        "policy_facts",
        "environment_instance",
        "tool_generation",
        "proposal_expiry",
    }
    assert Booking.objects.count() == 0


def test_an_approval_lets_the_run_book_and_succeed(worker, e17, approver):
    run, request = waiting_run(e17)
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    run = wait_for_run(run.pk)
    assert run.status == "succeeded", (run.outcome, run.reply)
    booking = Booking.objects.get()
    assert (booking.room.code, booking.requester) == ("R16", e17)
    record = ApprovalRecord.objects.get()
    assert NonceUse.objects.get().nonce == record.nonce
    assert ApprovalAudit.objects.filter(request=request, event="consumed").exists()
    assert run.events.filter(kind="approval_decided").exists()


def test_a_rejection_ends_the_run_with_the_reason_and_nothing_booked(worker, e17, approver):
    run, request = waiting_run(e17)
    assert approval_decide(
        request_id=request.pk, approver=approver, approve=False, reason="too expensive"
    ).ok
    run = wait_for_run(run.pk)
    assert run.status == "failed"
    assert "too expensive" in run.reply and "Nothing was booked" in run.reply
    assert Booking.objects.count() == 0
    assert Action.objects.get(pk=request.action_ref).result["code"] == "approval_rejected"


def test_nobody_deciding_in_time_fails_the_run_and_a_late_approval_is_refused(
    worker, e17, approver
):
    run, request = waiting_run(e17)
    ApprovalRequest.objects.filter(pk=request.pk).update(
        deadline=timezone.now() - timedelta(seconds=1)
    )
    assert sweeper.sweep()["expired_approvals"] == 1
    run = wait_for_run(run.pk)
    assert (run.status, run.outcome) == ("failed", "approval_expired")
    assert run.reply == "R16 needed approval and nobody decided in time; nothing was booked."
    late = approval_decide(request_id=request.pk, approver=approver, approve=True, reason="late")
    assert (late.ok, late.code) == (False, "already_decided")
    assert Booking.objects.count() == 0
    assert not ApprovalRecord.objects.exists()


def test_an_approval_whose_binding_drifted_is_refused_and_books_nothing(worker, e17, e23, approver):
    """Seed 002: a binding that no longer matches the state (here another booking moved the
    room's schedule on) is refused like any invalid approval: the action does not run."""
    run, request = waiting_run(e17)
    # The window changes after the decision, before the run goes on (the worker is told on
    # commit): the inbox's re-check let it through, the binding at execution does not.
    with transaction.atomic():
        assert approval_decide(
            request_id=request.pk, approver=approver, approve=True, reason="ok"
        ).ok
        change_r16(e23)

    action = wait_until(
        lambda: Action.objects.filter(pk=request.action_ref, status="rejected").first(),
        message="the drifted approval to be refused",
    )
    assert action.result["code"] == "approval_drifted"
    assert "environment_version" in action.result["message"]
    assert not run.events.filter(kind="approval_frozen").exists()
    assert not Booking.objects.filter(status="confirmed").exists()
    assert ApprovalAudit.objects.filter(request=request, event="not_valid").exists()
    assert not NonceUse.objects.exists()  # the approval was never used
    assert ApprovalRecord.objects.filter(request=request).exists()  # kept as evidence
    request.refresh_from_db()
    assert request.status == "approved"  # the decision stands; its action was refused


def test_a_booking_on_another_day_of_the_room_does_not_invalidate_an_approval(
    worker, e17, e23, approver
):
    """The binding holds the window's state, not the room's: R16 booked on another day after
    the request was made, the approval still books."""
    run, request = waiting_run(e17)
    book_r16_another_day(e23)
    assert approval_card(request=request).problems == []  # "it can still be done as requested"
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    run = wait_for_run(run.pk)
    assert run.status == "succeeded", (run.outcome, run.reply)
    assert Booking.objects.filter(requester=e17, room__code="R16", status="confirmed").count() == 1


@pytest.mark.parametrize("order", ["first_asked_first", "last_asked_first"])
def test_two_approvals_of_one_room_on_different_days_both_book(worker, e17, e23, approver, order):
    """Two employees ask for R16 on different days; approved in either order, both book."""
    first, first_request = waiting_run(e17)
    other_start, _ = slot(days=5, hour=10)
    second = wait_for_run(
        run_start(
            user=e23, request_text=f"book R16 on {other_start:%Y-%m-%d} 10:00-11:00 for 3 people"
        ).pk,
        statuses=("waiting_approval", "failed"),
    )
    assert second.status == "waiting_approval", (second.outcome, second.reply)
    second_request = ApprovalRequest.objects.get(run_ref=str(second.pk))
    pair = [(first, first_request), (second, second_request)]
    if order == "last_asked_first":
        pair.reverse()
    for run, request in pair:
        assert approval_decide(
            request_id=request.pk, approver=approver, approve=True, reason="ok"
        ).ok
        run = wait_for_run(run.pk)
        assert run.status == "succeeded", (run.outcome, run.reply)
    booked = Booking.objects.filter(room__code="R16", status="confirmed")
    assert sorted(booked.values_list("requester__username", flat=True)) == ["e17", "e23"]


def test_an_approval_that_expired_before_it_ran_freezes_until_a_fresh_approval(
    worker, e17, approver, settings
):
    """Seed 002: a genuine approval whose time ran out before execution is kept as evidence
    and the action frozen; only a fresh approval of the exact intent un-freezes it."""
    run, request = waiting_run(e17)
    settings.APPROVAL_VALID_MINUTES = 0  # signed to expire at once
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    wait_until(
        lambda: ApprovalRequest.objects.get(pk=request.pk).status == "stale",
        message="the expired approval to go stale",
    )
    run.refresh_from_db()
    action = Action.objects.get(pk=request.action_ref)
    assert run.status == action.status == "waiting_approval"  # frozen, not executed
    assert run.events.filter(kind="approval_frozen").exists()
    assert not Booking.objects.exists()
    assert not NonceUse.objects.exists()
    assert ApprovalRecord.objects.filter(request=request).exists()  # kept as evidence

    from approvals.services import approval_refresh

    settings.APPROVAL_VALID_MINUTES = 10
    assert approval_refresh(request_id=request.pk, approver=approver).ok
    fresh = wait_until(
        lambda: (
            ApprovalRequest.objects.filter(action_ref=request.action_ref, status="pending")
            .exclude(pk=request.pk)
            .first()
        ),
        message="a fresh request",
    )
    assert fresh.binding["intent_digest"] == request.binding["intent_digest"]
    assert approval_decide(request_id=fresh.pk, approver=approver, approve=True, reason="ok").ok
    run = wait_for_run(run.pk)
    assert run.status == "succeeded", (run.outcome, run.reply)
    assert Booking.objects.filter(requester=e17, room__code="R16").count() == 1
    assert NonceUse.objects.get().nonce == fresh.record.nonce


def test_an_admins_edit_of_the_room_invalidates_its_approval(worker, e17, approver):
    """The binding covers the facts the policy read: the room's approval flag, department,
    capacity and bookable. An edit of one of them after the approval was asked refuses it."""
    from bookings.models import Room

    _run, request = waiting_run(e17)
    assert request.binding["policy_facts"]["facts"]["requires_approval"] is True
    Room.objects.filter(code="R16").update(capacity=5)  # the admin's edit, no schedule change
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok

    action = wait_until(
        lambda: Action.objects.filter(pk=request.action_ref, status="rejected").first(),
        message="the approval of the old facts to be refused",
    )
    assert action.result["code"] == "approval_drifted"
    assert "policy_facts" in action.result["message"]
    assert not Booking.objects.exists()


@pytest.mark.parametrize("who", ["self", "employee"])
def test_the_requester_or_an_employee_cannot_decide(worker, e17, e23, who):
    _run, request = waiting_run(e17)
    if who == "self":
        from tests.accounts.factories import APPROVERS, group_get

        e17.groups.add(group_get(APPROVERS))
        decider, code = e17, "self_approval"
    else:
        decider, code = e23, "not_an_approver"
    refused = approval_decide(request_id=request.pk, approver=decider, approve=True, reason="x")
    assert (refused.ok, refused.code) == (False, code)
    request.refresh_from_db()
    assert request.status == "pending"
    assert not ApprovalRecord.objects.exists()
    audit = ApprovalAudit.objects.get(event="refused")
    assert (audit.actor, audit.code) == (decider, code)
    assert Booking.objects.count() == 0


def test_approving_the_action_of_a_cancelled_run_is_refused(worker, e17, approver):
    run, request = waiting_run(e17)
    run_cancel(run_id=run.pk, user=e17)
    request.refresh_from_db()
    assert request.status == "withdrawn"
    refused = approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok")
    assert (refused.ok, refused.code) == (False, "already_decided")
    assert Booking.objects.count() == 0


def test_the_inbox_is_for_approvers_and_its_post_needs_csrf(worker, e17, approver):
    _run, request = waiting_run(e17)
    employee = Client()
    employee.force_login(e17)
    assert employee.get("/approvals/").status_code == 403
    checked = Client(enforce_csrf_checks=True)
    checked.force_login(approver)
    page = checked.get("/approvals/")
    assert page.status_code == 200
    assert f'data-request="{request.pk}"' in page.text
    assert "R16 is a premium room" in page.text
    url = f"/approvals/{request.pk}/decide/"
    assert checked.post(url, {"decision": "approve", "reason": "ok"}).status_code == 403
    request.refresh_from_db()
    assert request.status == "pending"
    token = (
        page.cookies["csrftoken"].value
        if "csrftoken" in page.cookies
        else checked.cookies["csrftoken"].value
    )
    ok = checked.post(url, {"decision": "approve", "reason": "ok", "csrfmiddlewaretoken": token})
    assert ok.status_code == 302
    wait_until(lambda: Booking.objects.exists(), message="the approved booking")


@pytest.mark.django_db(transaction=True)
def test_twenty_parallel_approvals_give_one_decision_and_one_execution(worker, e17, approver):
    import threading

    run, request = waiting_run(e17)
    url = f"/approvals/{request.pk}/decide/"
    statuses: list[int] = []
    barrier = threading.Barrier(20)

    def approve():
        try:
            client = Client()
            client.force_login(approver)
            barrier.wait()
            statuses.append(client.post(url, {"decision": "approve", "reason": "ok"}).status_code)
        finally:
            connection.close()  # give the pooled connection back

    threads = [threading.Thread(target=approve) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    assert statuses == [302] * 20
    run = wait_for_run(run.pk)
    assert run.status == "succeeded", (run.outcome, run.reply)
    assert ApprovalRecord.objects.count() == 1
    assert ApprovalAudit.objects.filter(event="refused", code="already_decided").count() == 19
    assert Booking.objects.count() == 1
    assert NonceUse.objects.count() == 1


def test_a_direct_api_call_waits_then_runs_once_approved(worker, e17, approver):
    from agentops.runtime.direct import tool_call_governed

    pending = tool_call_governed(user=e17, name="reserve_room", arguments=r16_arguments())
    assert pending["code"] == "approval_pending"
    request = ApprovalRequest.objects.get(action_ref=pending["pending"]["action_id"])
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    run = wait_for_run(pending["pending"]["run_id"])
    assert (run.kind, run.status) == ("direct", "succeeded")
    assert Booking.objects.get().room.code == "R16"


def test_a_direct_api_call_rejected_ends_refused(worker, e17, approver):
    from agentops.runtime.direct import tool_call_governed

    pending = tool_call_governed(user=e17, name="reserve_room", arguments=r16_arguments())
    request = ApprovalRequest.objects.get(action_ref=pending["pending"]["action_id"])
    assert approval_decide(request_id=request.pk, approver=approver, approve=False, reason="no").ok
    run = wait_for_run(pending["pending"]["run_id"])
    assert (run.status, run.outcome) == ("failed", "refused")
    assert Booking.objects.count() == 0


def test_booking_a_premium_room_on_the_screen_waits_and_a_rejection_shows_why(
    worker, e17, approver
):
    import uuid

    screen = Client()
    screen.force_login(e17)
    booked = screen.post(
        "/book/",
        {
            "room": "R16",
            "start_at": START.isoformat(),
            "end_at": END.isoformat(),
            "attendees": 3,
            "idempotency_key": str(uuid.uuid4()),
            "version": Room.objects.get(code="R16").schedule_version,
        },
        HTTP_HX_REQUEST="true",
    )
    assert booked.status_code == 200
    assert "needs an approver" in booked.text
    assert Booking.objects.count() == 0
    request = ApprovalRequest.objects.get()
    assert request.requester == e17
    mine = screen.get("/bookings/").text
    assert f'data-request="{request.pk}" data-status="pending"' in mine

    assert approval_decide(
        request_id=request.pk, approver=approver, approve=False, reason="R16 is for the board"
    ).ok
    wait_until(
        lambda: Action.objects.get(pk=request.action_ref).status == "rejected",
        message="the rejection to reach the action",
    )
    mine = screen.get("/bookings/").text
    assert f'data-request="{request.pk}" data-status="rejected"' in mine
    assert "R16 is for the board" in mine
    assert Booking.objects.count() == 0


def test_the_requester_withdraws_a_waiting_request_and_the_run_is_cancelled(
    worker, e17, e23, approver
):
    run, request = waiting_run(e17)
    other = Client()
    other.force_login(e23)
    assert other.post(f"/requests/{request.pk}/withdraw/").status_code == 302
    request.refresh_from_db()
    assert request.status == "pending"  # only the requester may take it back
    owner = Client()
    owner.force_login(e17)
    page = owner.post(f"/requests/{request.pk}/withdraw/", follow=True)
    assert "Request withdrawn" in page.text
    run = wait_for_run(run.pk)
    assert (run.status, run.outcome) == ("cancelled", "cancelled_by_user")
    late = approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok")
    assert (late.ok, late.code) == (False, "already_decided")
    assert Booking.objects.count() == 0
    assert ApprovalAudit.objects.filter(event="refused", actor=e23).exists()
    assert ApprovalAudit.objects.filter(event="withdrawn", actor=e17).exists()


def test_a_frozen_action_nobody_refreshes_expires_and_ends_the_run(
    worker, e17, e23, approver, settings
):
    run, request = waiting_run(e17)
    settings.APPROVAL_VALID_MINUTES = 0  # the approval expires before it runs: frozen
    with transaction.atomic():  # and its window changes before the run goes on
        assert approval_decide(
            request_id=request.pk, approver=approver, approve=True, reason="ok"
        ).ok
        change_r16(e23)
    wait_until(
        lambda: ApprovalRequest.objects.get(pk=request.pk).status == "stale", message="stale"
    )
    ApprovalRequest.objects.filter(pk=request.pk).update(
        deadline=timezone.now() - timedelta(seconds=1)
    )
    assert sweeper.sweep()["expired_approvals"] == 1
    run = wait_for_run(run.pk)
    assert (run.status, run.outcome) == ("failed", "approval_expired")
    assert not Booking.objects.filter(status="confirmed").exists()


def test_the_same_key_after_an_approved_call_answers_its_booking_and_asks_nobody_again(
    worker, e17, approver
):
    """A client retries a premium booking with its key after the approver approved it and it
    ran: the answer is the booking it made, not a second approval request."""
    from agentops.runtime.direct import tool_call_governed

    arguments = r16_arguments()
    first = tool_call_governed(
        user=e17, name="reserve_room", arguments=arguments, idempotency_key="k"
    )
    assert first["code"] == "approval_pending"
    request = ApprovalRequest.objects.get()
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    action = wait_until(
        lambda: Action.objects.filter(pk=request.action_ref, status="succeeded").first(),
        message="the approved call to run",
    )

    again = tool_call_governed(
        user=e17, name="reserve_room", arguments=arguments, idempotency_key="k"
    )

    booking = Booking.objects.get()
    assert again["ok"] is True, again
    assert again["data"]["booking_id"] == booking.code == action.result["data"]["booking_id"]
    assert ApprovalRequest.objects.count() == 1
    assert Booking.objects.count() == 1
    # Another request under the same key is still refused as a reuse of the key.
    other = tool_call_governed(
        user=e17, name="reserve_room", arguments=arguments | {"attendees": 4}, idempotency_key="k"
    )
    assert other["reason"] == "idempotency_key_reuse"
    # Once the booking is cancelled, the replay says so instead of answering green.
    booking_cancel(user=e17, booking_code=booking.code)
    gone = tool_call_governed(
        user=e17, name="reserve_room", arguments=arguments, idempotency_key="k"
    )
    assert gone["ok"] is False
    assert ApprovalRequest.objects.count() == 1


def test_a_waiting_request_whose_slot_someone_else_took_is_closed_and_its_requester_told(
    worker, e17, admin_user, approver, mailoutbox
):
    """Left open it would wait for days, and an approver could only refuse it: the sweep
    closes it as no longer possible, the run ends saying why, the requester gets a mail."""
    run, request = waiting_run(e17)
    booking_reserve(  # an admin books the same window of R16 directly
        user=admin_user,
        room_code="R16",
        start_at=START,
        end_at=END,
        attendees=2,
        idempotency_key="taken",
    )
    e17.email = "e17@example.com"
    e17.save(update_fields=["email"])

    assert sweeper.sweep()["overtaken_approvals"] == 1

    request.refresh_from_db()
    assert request.status == "overtaken"
    run = wait_for_run(run.pk)
    assert (run.status, run.outcome) == ("failed", "not_done")
    assert "R16" in run.reply and "taken" in run.reply
    assert Action.objects.get(pk=request.action_ref).status == "rejected"
    assert not Booking.objects.filter(requester=e17).exists()
    assert ApprovalAudit.objects.filter(request=request, event="overtaken").exists()
    mail = wait_until(
        lambda: next((m for m in mailoutbox if "e17@example.com" in m.to), None),
        message="the requester's mail",
    )
    assert "No longer possible" in mail.subject
    assert "was taken meanwhile" in mail.body
    # Nothing left for an approver to decide; a second sweep closes nothing.
    assert sweeper.sweep()["overtaken_approvals"] == 0


def premium_series_waiting(user) -> ApprovalRequest:
    """A weekly series of two meetings in R16 asked for through the runtime: its request."""
    from agentops.runtime.direct import tool_call_governed

    answer = tool_call_governed(
        user=user,
        name="reserve_series",
        arguments={
            "room_id": "R16",
            "start_at": START.isoformat(),
            "end_at": END.isoformat(),
            "rrule": "FREQ=WEEKLY;COUNT=2",
            "attendees": 3,
            "mode": "all",
        },
    )
    assert answer["code"] == "approval_pending", answer
    return ApprovalRequest.objects.get()


def test_an_admins_edit_of_the_room_invalidates_an_approval_of_a_series(worker, e17, approver):
    """A recurring series' approval binds the room's facts too: an edit of the room after the
    request voids it, as for one booking."""
    request = premium_series_waiting(e17)
    assert request.binding["policy_facts"]["facts"]["requires_approval"] is True
    with transaction.atomic():  # the edit lands after the decision, before the call runs
        assert approval_decide(
            request_id=request.pk, approver=approver, approve=True, reason="ok"
        ).ok
        Room.objects.filter(code="R16").update(capacity=5)

    action = wait_until(
        lambda: Action.objects.filter(pk=request.action_ref, status="rejected").first(),
        message="the approval of the old facts to be refused",
    )
    assert action.result["code"] == "approval_drifted"
    assert "policy_facts" in action.result["message"]
    assert not Booking.objects.exists()


def test_a_waiting_move_whose_booking_was_cancelled_is_shown_and_closed_as_no_longer_possible(
    worker, e17, approver
):
    """The model-based test found it: the approver's card showed a waiting move of a booking
    cancelled meanwhile as still possible. The card says why not, and the sweep closes it."""
    from agentops.runtime.direct import tool_call_governed
    from tests.bookings.factories import booking_create

    booking = booking_create(requester=e17, room="R7", start_at=START, end_at=END)
    answer = tool_call_governed(
        user=e17,
        name="change_booking",
        arguments={
            "booking_id": booking.code,
            "room_id": "R12",  # another department's room: an approver decides
            "expected_version": Room.objects.get(code="R12").schedule_version,
        },
    )
    assert answer["code"] == "approval_pending", answer
    request = ApprovalRequest.objects.get()
    assert approval_card(request=request).problems == []
    booking_cancel(user=e17, booking_code=booking.code)

    problems = approval_card(request=request).problems
    assert [p["msgid"] for p in problems] == [
        "%(booking)s was cancelled meanwhile: there is nothing to change."
    ]
    assert not approval_decide(
        request_id=request.pk, approver=approver, approve=True, reason="ok"
    ).ok
    assert sweeper.sweep()["overtaken_approvals"] == 1
    request.refresh_from_db()
    assert request.status == "overtaken"


def test_a_premium_series_with_a_taken_time_shows_it_on_the_card_and_cannot_be_approved(
    worker, e17, e23, admin_user, approver
):
    """The model-based test found it (F8): a series of the premium room in "all" mode with one
    of its times taken went to an approver whose card said it could still be done; approved,
    it failed. The card says which times are taken, the decision is refused, the sweep closes
    it."""

    booking_reserve(  # the second meeting's time is taken
        user=admin_user,
        room_code="R16",
        start_at=START + timedelta(days=7),
        end_at=END + timedelta(days=7),
        attendees=2,
        idempotency_key="taken",
    )
    request = premium_series_waiting(e17)
    problems = approval_card(request=request).problems
    assert problems == [
        {
            "msgid": "%(room)s is already booked at %(count)d of these times.",
            "params": {"room": "R16", "count": 1},
        }
    ]
    assert not approval_decide(
        request_id=request.pk, approver=approver, approve=True, reason="ok"
    ).ok
    assert sweeper.sweep()["overtaken_approvals"] == 1
    assert Booking.objects.count() == 1  # only the one that was there
