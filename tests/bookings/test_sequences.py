"""The sequences a company makes every day, checked against the database after each step: a
meeting of a series moved to another room and then cancelled with its series, a change racing
a cancel, ten concurrent changes of one booking. A freed window is bookable with the version
the search returns; a version is written by the room whose schedule changed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from bookings.checkin import bookings_release_no_shows
from bookings.errors import BookingError
from bookings.models import Booking, BookingStatus, Room
from bookings.selectors import room_window_version
from bookings.series import SeriesMode, series_cancel, series_reserve
from bookings.services import Change, booking_cancel, booking_change, booking_reserve
from tests.bookings.factories import booking_create
from tests.bookings.test_concurrency import run_together
from tests.conftest import slot

pytestmark = pytest.mark.usefixtures("rooms")


def version(code: str) -> int:
    return Room.objects.get(code=code).schedule_version


def book_with_search_version(user, room: str, start, end) -> Booking:
    """What a person does after the search shows the window free: reserve it with the room's
    version the search returned."""
    return booking_reserve(
        user=user,
        room_code=room,
        start_at=start,
        end_at=end,
        attendees=2,
        expected_version=version(room),
        idempotency_key=f"after-{room}-{start:%Y%m%d%H%M}",
    ).booking


def weekly_in_r7(user, *, weeks: int = 3):
    start, end = slot(days=2, hour=9)
    return series_reserve(
        user=user,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule=f"FREQ=WEEKLY;COUNT={weeks}",
        attendees=3,
        mode=SeriesMode.ALL,
        idempotency_key="weekly-r7",
    )


def test_a_meeting_moved_to_another_room_then_cancelled_with_its_series_frees_its_new_slot(
    e17, e23
):
    booked = weekly_in_r7(e17)
    moved = booked.booked[1]
    start, end = moved.start_at, moved.end_at
    booking_change(user=e17, booking_code=moved.code, room_code="R2", idempotency_key="to-r2")
    r2_before, r7_before = version("R2"), version("R7")

    cancelled = series_cancel(user=e17, series_id=booked.series.pk, idempotency_key="cancel-all")

    assert set(cancelled.cancelled) == {b.code for b in booked.booked}
    moved.refresh_from_db()
    assert (moved.room.code, moved.status) == ("R2", BookingStatus.CANCELLED)
    # Each room's version moved once, and the moved meeting carries R2's, not R7's.
    assert (version("R2"), version("R7")) == (r2_before + 1, r7_before + 1)
    assert moved.cancelled_version == version("R2")
    assert room_window_version(code="R2", windows=[(start, end)]) <= version("R2")
    # Someone else books the freed R2 slot with the version the search gives: it works.
    taken = book_with_search_version(e23, "R2", start, end)
    assert taken.status == BookingStatus.CONFIRMED
    assert Booking.objects.filter(room__code="R2", status=BookingStatus.CONFIRMED).count() == 1


def test_a_no_show_release_of_a_series_frees_a_meeting_moved_to_another_room(e17, e23, settings):
    """Releasing the series after missed check-ins cancels a later meeting in the room it was
    moved to, under that room's version."""
    Room.objects.filter(code="R7").update(checkin_required=True)
    settings.BOOKING_SERIES_MISSED_CHECKINS = 1
    booked = weekly_in_r7(e17)
    first, later = booked.booked[0], booked.booked[2]
    booking_change(user=e17, booking_code=later.code, room_code="R2", idempotency_key="to-r2")
    Room.objects.filter(code="R2").update(checkin_required=True)

    released = bookings_release_no_shows(now=first.start_at + timedelta(hours=1))

    assert later.code in released.codes
    later.refresh_from_db()
    assert (later.room.code, later.status) == ("R2", BookingStatus.CANCELLED)
    assert later.cancelled_version == version("R2")
    assert book_with_search_version(e23, "R2", later.start_at, later.end_at).pk


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
@pytest.mark.parametrize("trial", range(5))
def test_a_change_racing_a_cancel_leaves_no_slot_nobody_can_book(e17, e23, trial):
    start, end = slot(days=3, hour=11)
    booking = booking_create(requester=e17, room="R7", start_at=start, end_at=end)
    r2 = version("R2")

    def work(i: int):
        if i == 0:
            return booking_change(
                user=e17,
                booking_code=booking.code,
                room_code="R2",
                expected_version=r2,
                idempotency_key=f"move-{trial}",
            )
        return booking_cancel(user=e17, booking_code=booking.code)

    outcomes = run_together(2, work)
    # The cancel always succeeds; the change succeeds before it or is refused after it.
    assert isinstance(outcomes[1], Booking), outcomes
    assert isinstance(outcomes[0], Change | BookingError), outcomes
    booking.refresh_from_db()
    assert booking.status == BookingStatus.CANCELLED  # the cancel always lands, before or after
    room = booking.room.code
    assert booking.cancelled_version == version(room)
    # Whichever room it ended in, its window is free and bookable with the searched version.
    assert book_with_search_version(e23, room, start, end).status == BookingStatus.CONFIRMED


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_ten_concurrent_changes_of_one_booking_one_wins_the_others_conflict(e17):
    """Each change read R2 at the same version: one moves the booking, the others are told the
    schedule changed since they read it. No crash, no other error."""
    start, end = slot(days=3, hour=15)
    booking = booking_create(requester=e17, room="R7", start_at=start, end_at=end)
    seen = version("R2")

    def work(i: int) -> Change:
        return booking_change(
            user=e17,
            booking_code=booking.code,
            room_code="R2",
            start_at=start + timedelta(minutes=15 * (i % 3)),
            end_at=end + timedelta(minutes=15 * (i % 3)),
            expected_version=seen,
            idempotency_key=f"change-{i}",
        )

    outcomes = run_together(10, work)
    won = [o for o in outcomes if isinstance(o, Change)]
    lost = [o for o in outcomes if not isinstance(o, Change)]
    assert len(won) == 1, outcomes
    assert [
        (type(o).__name__, getattr(o, "reason", o))
        for o in lost
        if not (isinstance(o, BookingError) and o.reason == "conflict")
    ] == []
    booking.refresh_from_db()
    assert booking.room.code == "R2"
    assert booking.during == won[0].booking.during
    assert booking.changes.count() == 1


def test_a_change_carrying_a_version_from_before_the_bookings_own_last_change_is_stale(e17):
    start, end = slot(days=3, hour=15)
    booking = booking_create(requester=e17, room="R7", start_at=start, end_at=end)
    seen = version("R7")
    booking_change(
        user=e17,
        booking_code=booking.code,
        start_at=start + timedelta(minutes=30),
        end_at=end + timedelta(minutes=30),
        expected_version=seen,
        idempotency_key="first",
    )
    with pytest.raises(BookingError, match="changed since it was read"):
        booking_change(
            user=e17,
            booking_code=booking.code,
            attendees=4,
            expected_version=seen,
            idempotency_key="second",
        )
    assert booking.changes.count() == 1
    assert timezone.now() < start


# --- validation before an approval, not after it --------------------------------------------


def _rows() -> tuple[int, int, list[int]]:
    from approvals.models import ApprovalRequest

    return (
        Booking.objects.count(),
        ApprovalRequest.objects.count(),
        list(Room.objects.order_by("pk").values_list("schedule_version", flat=True)),
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_a_booking_too_long_for_the_rules_is_refused_before_an_approver_is_asked(e17, settings):
    """Nine hours of a premium room: refused at once (too_long), not sent to an approver who
    would then see it fail."""
    from agentops.runtime.direct import tool_call_governed

    start, _ = slot(days=3, hour=8)
    end = start + timedelta(hours=settings.BOOKING_MAX_HOURS + 1)
    before = _rows()
    answer = tool_call_governed(
        user=e17,
        name="reserve_room",
        arguments={
            "room_id": "R16",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "expected_version": version("R16"),
        },
    )
    assert (answer["reason"], answer["code"]) == ("invalid_input", "too_long"), answer
    assert _rows() == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
@pytest.mark.parametrize("room", ["R7", "R16"])
@pytest.mark.parametrize("interval", [0, 13, 20])
def test_a_series_repeating_outside_every_1_to_12_is_refused_on_every_channel(e17, room, interval):
    from agentops.runtime.direct import tool_call_governed

    start, end = slot(days=3, hour=9)
    before = _rows()
    answer = tool_call_governed(
        user=e17,
        name="reserve_series",
        arguments={
            "room_id": room,
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "rrule": f"FREQ=WEEKLY;INTERVAL={interval};COUNT=3",
            "attendees": 2,
            "mode": "all",
        },
    )
    assert (answer["reason"], answer["code"]) == ("invalid_input", "series_bad_interval"), answer
    assert _rows() == before


def test_checking_in_and_then_moving_a_booking_does_not_dodge_the_no_show_release(e17):
    from bookings.checkin import booking_check_in

    Room.objects.filter(code__in=["R7", "R2"]).update(checkin_required=True)
    start, end = slot(days=3, hour=10)
    booking = booking_create(requester=e17, room="R7", start_at=start, end_at=end)
    booking_check_in(user=e17, booking_code=booking.code, now=start - timedelta(minutes=5))
    later = start + timedelta(hours=3)
    booking_change(
        user=e17,
        booking_code=booking.code,
        room_code="R2",
        start_at=later,
        end_at=later + (end - start),
        idempotency_key="move-after-check-in",
    )
    booking.refresh_from_db()
    assert booking.checked_in_at is None

    released = bookings_release_no_shows(now=later + timedelta(hours=1))

    assert booking.code in released.codes
    booking.refresh_from_db()
    assert booking.status == BookingStatus.CANCELLED
    assert booking.cancelled_version == version("R2")


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_a_change_of_a_cancelled_booking_into_a_room_that_needs_approval_is_refused_at_once(e17):
    """The model-based test found it: a cancelled booking moved into another department's room
    went to an approver, who could only see it fail. Refused at once, nothing asked."""
    from agentops.runtime.direct import tool_call_governed

    start, end = slot(days=3, hour=10)
    booking = booking_create(requester=e17, room="R7", start_at=start, end_at=end, cancelled=True)
    before = _rows()
    answer = tool_call_governed(
        user=e17,
        name="change_booking",
        arguments={
            "booking_id": booking.code,
            "room_id": "R12",  # another department's room: HIGH
            "expected_version": version("R12"),
        },
    )
    assert (answer["reason"], answer["code"]) == ("conflict", "booking_not_confirmed"), answer
    assert _rows() == before
