"""booking_change: one write that moves a booking in place (it keeps its code), under the
exclusion constraint, with version checks and its own receipt; and the governed path of the
screens (change_booking through the runtime), the approval of a move into R16 included."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection

from agentops.contract import governed_call, message_text
from agentops.models import Action
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from bookings.errors import BookingError
from bookings.models import Booking, BookingChange, Room
from bookings.services import booking_change, booking_change_request, booking_reserve
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.usefixtures("rooms")]


def book(user, room="R7", window=None, key="k1", attendees=3):
    start, end = window or slot()
    return booking_reserve(
        user=user,
        room_code=room,
        start_at=start,
        end_at=end,
        attendees=attendees,
        idempotency_key=key,
    ).booking


def versions() -> dict[str, int]:
    return dict(Room.objects.values_list("code", "schedule_version"))


def nothing_written(fn, reason: str, code: str) -> BookingError:
    """``fn`` is refused with (reason, code) and every row count and schedule version stays."""
    before = (Booking.objects.count(), BookingChange.objects.count(), versions())
    rows = list(
        Booking.objects.order_by("pk").values_list("room_id", "during", "attendees", "title")
    )
    with pytest.raises(BookingError) as info:
        fn()
    assert (info.value.reason, info.value.code) == (reason, code), info.value
    assert (Booking.objects.count(), BookingChange.objects.count(), versions()) == before
    assert (
        list(Booking.objects.order_by("pk").values_list("room_id", "during", "attendees", "title"))
        == rows
    )
    return info.value


@pytest.mark.django_db
def test_a_move_keeps_the_code_and_bumps_both_rooms(e17):
    booking = book(e17)
    before = versions()
    start, end = slot(hour=16)
    done = booking_change(
        user=e17,
        booking_code=booking.code,
        idempotency_key="c1",
        room_code="R9",
        start_at=start,
        end_at=end,
        title="Planning",
        expected_version=before["R9"],
    )
    moved = Booking.objects.get()
    assert moved.code == booking.code == done.booking.code
    assert (moved.room.code, moved.start_at, moved.end_at, moved.title) == (
        "R9",
        start,
        end,
        "Planning",
    )
    after = versions()
    assert after["R7"] == before["R7"] + 1 and after["R9"] == before["R9"] + 1
    assert {k: v for k, v in after.items() if k not in {"R7", "R9"}} == {
        k: v for k, v in before.items() if k not in {"R7", "R9"}
    }
    receipt = BookingChange.objects.get(idempotency_key="c1")
    assert (receipt.from_room.code, receipt.to_room.code) == ("R7", "R9")
    # The old slot is free again: someone else can have it.
    assert book(e17, key="k2").room.code == "R7"


@pytest.mark.django_db
def test_a_title_change_moves_no_schedule_version(e17):
    booking = book(e17)
    before = versions()
    booking_change(user=e17, booking_code=booking.code, idempotency_key="c1", title="<b>Retro</b>")
    assert Booking.objects.get().title == "<b>Retro</b>"
    assert versions() == before


@pytest.mark.django_db
def test_the_same_key_replays_and_other_changes_under_it_are_refused(e17):
    booking = book(e17)
    start, end = slot(hour=16)
    first = booking_change(
        user=e17, booking_code=booking.code, idempotency_key="c1", start_at=start, end_at=end
    )
    again = booking_change(
        user=e17, booking_code=booking.code, idempotency_key="c1", start_at=start, end_at=end
    )
    assert again.replayed and again.receipt.pk == first.receipt.pk
    later, _ = slot(hour=18)
    nothing_written(
        lambda: booking_change(
            user=e17,
            booking_code=booking.code,
            idempotency_key="c1",
            start_at=later,
            end_at=later + timedelta(hours=1),
        ),
        "idempotency_key_reuse",
        "idempotency_key_reuse",
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "reason", "code"),
    [
        ({"room_code": "R1", "attendees": 3}, "invalid_input", "over_capacity"),
        ({"room_code": "R11"}, "invalid_input", "room_not_bookable"),
        ({"room_code": "R404"}, "not_found", "room_not_found"),
        ({"title": "x" * 121}, "invalid_input", "title_too_long"),
        ({"attendees": 3}, "invalid_input", "nothing_to_change"),
        ({"start_at": "past"}, "invalid_input", "start_in_past"),
        ({"end_at": "before"}, "invalid_input", "end_not_after_start"),
    ],
)
def test_refused_changes_write_nothing(e17, change, reason, code):
    booking = book(e17)
    if change.get("start_at") == "past":
        change = {
            "start_at": booking.start_at - timedelta(days=5),
            "end_at": booking.end_at - timedelta(days=5),
        }
    if change.get("end_at") == "before":
        change = {"end_at": booking.start_at - timedelta(minutes=30)}
    nothing_written(
        lambda: booking_change(user=e17, booking_code=booking.code, idempotency_key="c1", **change),
        reason,
        code,
    )


@pytest.mark.django_db
def test_a_move_onto_a_taken_slot_or_a_stale_version_is_conflict(e17, e23):
    mine = book(e17)
    theirs = book(e23, room="R9", window=slot(hour=16), key="k2")
    nothing_written(
        lambda: booking_change(
            user=e17,
            booking_code=mine.code,
            idempotency_key="c1",
            room_code="R9",
            start_at=theirs.start_at,
            end_at=theirs.end_at,
        ),
        "conflict",
        "slot_taken",
    )
    nothing_written(
        lambda: booking_change(
            user=e17,
            booking_code=mine.code,
            idempotency_key="c2",
            room_code="R9",
            start_at=theirs.start_at - timedelta(minutes=30),
            end_at=theirs.start_at + timedelta(minutes=30),
            expected_version=0,
        ),
        "conflict",
        "stale_version",
    )


@pytest.mark.django_db
def test_someone_elses_booking_cannot_be_changed_and_looks_absent(e17, e23):
    theirs = book(e23)
    nothing_written(
        lambda: booking_change(
            user=e17, booking_code=theirs.code, idempotency_key="c1", title="mine now"
        ),
        "not_found",
        "booking_not_found",
    )


@pytest.mark.django_db(transaction=True)
def test_two_moves_into_one_slot_at_once_one_wins(e17, e23):
    a = book(e17, key="k1")
    b = book(e23, room="R3", key="k2")
    start, end = slot(hour=17)
    barrier = threading.Barrier(2)
    outcomes: list = [None, None]

    def move(i, user, code):
        try:
            connection.ensure_connection()
            barrier.wait(timeout=30)
            outcomes[i] = booking_change(
                user=user,
                booking_code=code,
                idempotency_key=f"race{i}",
                room_code="R5",
                start_at=start,
                end_at=end,
            )
        except BaseException as exc:  # the test inspects both
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [
        threading.Thread(target=move, args=(0, e17, a.code)),
        threading.Thread(target=move, args=(1, e23, b.code)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(lost) == 1 and isinstance(lost[0], BookingError) and lost[0].code == "slot_taken", (
        outcomes
    )
    assert Booking.objects.filter(room__code="R5").count() == 1
    assert BookingChange.objects.count() == 1
    # The loser's booking is where it was.
    loser = a if isinstance(outcomes[0], BaseException) else b
    assert Booking.objects.get(pk=loser.pk).room_id == loser.room_id


@pytest.mark.django_db(transaction=True)
def test_a_move_and_a_reservation_racing_for_one_slot_never_double_book(e17, e23):
    a = book(e17, key="k1")
    start, end = slot(hour=17)
    barrier = threading.Barrier(2)
    outcomes: list = [None, None]

    def run(i):
        try:
            connection.ensure_connection()
            barrier.wait(timeout=30)
            if i == 0:
                outcomes[i] = booking_change(
                    user=e17,
                    booking_code=a.code,
                    idempotency_key="m",
                    room_code="R5",
                    start_at=start,
                    end_at=end,
                )
            else:
                outcomes[i] = booking_reserve(
                    user=e23,
                    room_code="R5",
                    start_at=start,
                    end_at=end,
                    attendees=2,
                    idempotency_key="r",
                )
        except BaseException as exc:
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(isinstance(o, BaseException) for o in outcomes) == 1, outcomes
    assert Booking.objects.filter(room__code="R5", status="confirmed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_screen_change_goes_through_the_runtime_as_one_action(e17):
    booking = book(e17)
    start, end = slot(hour=16)
    done = booking_change_request(
        user=e17,
        booking_code=booking.code,
        idempotency_key="c1",
        room_code="R9",
        start_at=start,
        end_at=end,
        attendees=3,
        title="Sync",
    )
    assert done.kind == "done" and done.booking.code == booking.code
    action = Action.objects.get(tool="change_booking")
    assert action.status == "succeeded"
    # Its trace: the gate's decision and the call's outcome (a direct call records no
    # verification event yet: see the report).
    assert {"gate", "execution_finished"} <= set(action.run.events.values_list("kind", flat=True))


def test_a_move_into_r16_waits_for_an_approver_and_the_old_slot_is_held(worker, e17, approver):
    booking = book(e17)
    before = versions()
    start, end = slot(hour=16)
    done = booking_change_request(
        user=e17,
        booking_code=booking.code,
        idempotency_key="c1",
        room_code="R16",
        start_at=start,
        end_at=end,
        attendees=3,
        title="Board",
    )
    assert done.kind == "pending"
    # Nothing moved while the approval waits.
    held = Booking.objects.get()
    assert (held.room.code, held.start_at, held.title) == ("R7", booking.start_at, "")
    assert versions() == before and BookingChange.objects.count() == 0
    request = ApprovalRequest.objects.get()
    assert request.intent["params"]["title"] == "Board"
    assert any("R16" in message_text(r) for r in request.intent["risk_reasons"])
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    run = wait_for_run(Action.objects.get(tool="change_booking").run_id)
    assert run.status == "succeeded"
    moved = Booking.objects.get()
    assert (moved.code, moved.room.code, moved.start_at) == (booking.code, "R16", start)


@pytest.mark.django_db(transaction=True)
def test_the_change_tool_refuses_through_the_gate_with_nothing_written(e17):
    booking = book(e17)
    before = (Booking.objects.count(), versions())
    envelope = governed_call(
        user=e17,
        tool="change_booking",
        arguments={
            "booking_id": booking.code,
            "room_id": "R1",
            "attendees": 3,
            "expected_version": 0,
        },
        idempotency_key="c1",
    )
    assert envelope["ok"] is False and envelope["code"] == "over_capacity"
    assert (Booking.objects.count(), versions()) == before
