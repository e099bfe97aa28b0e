from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone

from bookings.errors import BookingError
from bookings.models import Booking, BookingStatus, Room
from bookings.selectors import booking_get_by_key, room_search
from bookings.services import booking_cancel, booking_reserve
from tests.conftest import slot

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rooms")]


def reserve(user, room="R7", window=None, attendees=3, key="k1", **kw):
    start, end = window or slot()
    return booking_reserve(
        user=user,
        room_code=room,
        start_at=start,
        end_at=end,
        attendees=attendees,
        idempotency_key=key,
        **kw,
    )


def refused(reason: str, code: str, fn, *args, **kwargs) -> BookingError:
    before_bookings = Booking.objects.count()
    before_versions = list(Room.objects.order_by("code").values_list("schedule_version", flat=True))
    with pytest.raises(BookingError) as info:
        fn(*args, **kwargs)
    assert (info.value.reason, info.value.code) == (reason, code), info.value
    assert info.value.message
    assert Booking.objects.count() == before_bookings
    assert (
        list(Room.objects.order_by("code").values_list("schedule_version", flat=True))
        == before_versions
    )
    return info.value


def test_reserve_confirms_and_bumps_version(e17):
    version = Room.objects.get(code="R7").schedule_version
    res = reserve(e17, expected_version=version, equipment=["projector"])
    booking = Booking.objects.get()
    assert res.booking.code == booking.code
    assert booking.code.startswith("B")
    assert booking.status == BookingStatus.CONFIRMED
    assert booking.requester == e17
    assert booking.during.bounds == "[)"
    assert res.schedule_version == version + 1 == Room.objects.get(code="R7").schedule_version
    assert not res.replayed


def test_booking_codes_are_distinct_and_sequential(e17):
    a = reserve(e17, window=slot(hour=9), key="a").booking.code
    b = reserve(e17, window=slot(hour=10), key="b").booking.code
    assert int(b[1:]) == int(a[1:]) + 1


def test_reserve_with_stale_version_is_conflict(e17, e23):
    version = Room.objects.get(code="R7").schedule_version
    reserve(e23, window=slot(hour=14, minute=30), key="first")  # touches the observed window
    err = refused("conflict", "stale_version", reserve, e17, expected_version=version, key="second")
    assert "again" in err.hint


def test_cancel_in_the_window_also_makes_an_observation_stale(e17, e23):
    code = reserve(e23, key="first").booking.code
    version = Room.objects.get(code="R7").schedule_version  # observed: the slot is busy
    booking_cancel(user=e23, booking_code=code)
    refused("conflict", "stale_version", reserve, e17, expected_version=version, key="second")


def test_write_to_another_time_of_the_room_does_not_make_it_stale(e17, e23):
    version = Room.objects.get(code="R7").schedule_version
    reserve(e23, window=slot(hour=9), key="first")  # same room, another time
    res = reserve(e17, expected_version=version, key="second")
    assert (
        res.booking.created_version == version + 2 == Room.objects.get(code="R7").schedule_version
    )


def test_expected_version_from_the_future_is_refused(e17):
    version = Room.objects.get(code="R7").schedule_version
    refused("conflict", "stale_version", reserve, e17, expected_version=version + 5)


def test_overlap_is_conflict(e17, e23):
    reserve(e17, window=slot(hour=14, hours=2), key="first")
    start, _ = slot(hour=15)
    refused(
        "conflict",
        "slot_taken",
        reserve,
        e23,
        window=(start, start + timedelta(minutes=30)),
        key="x",
    )


def test_touching_windows_do_not_overlap(e17, e23):
    reserve(e17, window=slot(hour=14), key="first")
    reserve(e23, window=slot(hour=15), key="second")
    assert Booking.objects.filter(status="confirmed").count() == 2


def test_constraint_backstop_maps_23p01(e17):
    """Even a write that skips the service is refused by PostgreSQL itself."""
    reserve(e17, key="first")
    start, end = slot()
    room = Room.objects.get(code="R7")
    with pytest.raises(IntegrityError) as info, transaction.atomic():
        Booking.objects.create(
            room=room,
            requester=e17,
            during=DateTimeTZRange(start, end),
            attendees=2,
            idempotency_key="raw",
        )
    assert info.value.__cause__.sqlstate == "23P01"


def test_same_key_returns_first_booking(e17):
    first = reserve(e17, key="same")
    again = reserve(e17, key="same")
    assert again.replayed
    assert again.booking.code == first.booking.code
    assert Booking.objects.count() == 1


def test_same_key_with_stale_version_still_replays(e17):
    version = Room.objects.get(code="R7").schedule_version
    first = reserve(e17, key="same", expected_version=version)
    again = reserve(e17, key="same", expected_version=version)
    assert again.replayed and again.booking.code == first.booking.code


def test_same_key_other_request_is_refused(e17):
    reserve(e17, key="same")
    refused("idempotency_key_reuse", "idempotency_key_reuse", reserve, e17, room="R9", key="same")


def test_same_key_other_user_is_refused(e17, e23):
    reserve(e17, key="same")
    refused("idempotency_key_reuse", "idempotency_key_reuse", reserve, e23, key="same")


def test_lookup_by_key(e17):
    assert booking_get_by_key(idempotency_key="nope") is None
    code = reserve(e17, key="look").booking.code
    assert booking_get_by_key(idempotency_key="look").code == code


@pytest.mark.parametrize(
    ("kwargs", "reason", "code"),
    [
        (
            {"window": (datetime(2030, 1, 1, 9), datetime(2030, 1, 1, 10))},
            "invalid_input",
            "naive_datetime",
        ),
        ({"window": (slot()[1], slot()[0])}, "invalid_input", "end_not_after_start"),
        ({"window": (slot()[0], slot()[0])}, "invalid_input", "end_not_after_start"),
        ({"window": slot(days=-1)}, "invalid_input", "start_in_past"),
        ({"window": slot(days=91)}, "invalid_input", "beyond_horizon"),
        ({"window": slot(hour=8, hours=9)}, "invalid_input", "too_long"),
        ({"attendees": 0}, "invalid_input", "attendees_too_few"),
        ({"attendees": 5}, "invalid_input", "over_capacity"),
        ({"room": "R99"}, "not_found", "room_not_found"),
        ({"room": "R11", "attendees": 2}, "invalid_input", "room_not_bookable"),
        ({"room": "R3", "equipment": ["projector"]}, "invalid_input", "missing_equipment"),
        ({"equipment": ["teleporter"]}, "invalid_input", "unknown_equipment"),
        ({"key": ""}, "invalid_input", "bad_idempotency_key"),
    ],
)
def test_reserve_rules_refuse_and_write_nothing(e17, kwargs, reason, code):
    refused(reason, code, reserve, e17, **kwargs)


def test_rules_follow_settings(e17, settings):
    settings.BOOKING_MAX_HOURS = 1
    refused("invalid_input", "too_long", reserve, e17, window=slot(hours=2))
    settings.BOOKING_HORIZON_DAYS = 3
    refused("invalid_input", "beyond_horizon", reserve, e17, window=slot(days=4))


def test_cancel_by_requester_frees_the_slot_and_bumps_version(e17, e23):
    code = reserve(e17, key="first").booking.code
    before = Room.objects.get(code="R7").schedule_version
    cancelled = booking_cancel(user=e17, booking_code=code)
    assert cancelled.status == BookingStatus.CANCELLED
    assert cancelled.cancelled_at is not None
    assert Room.objects.get(code="R7").schedule_version == before + 1
    again = reserve(e23, key="second")
    assert again.booking.code != code
    assert Booking.objects.filter(status="confirmed").count() == 1


def test_cancel_twice_returns_it_unchanged(e17):
    code = reserve(e17).booking.code
    booking_cancel(user=e17, booking_code=code)
    version = Room.objects.get(code="R7").schedule_version
    assert booking_cancel(user=e17, booking_code=code).status == BookingStatus.CANCELLED
    assert Room.objects.get(code="R7").schedule_version == version


def test_cancel_others_booking_looks_like_no_booking(e17, e23):
    code = reserve(e17).booking.code
    refused("not_found", "booking_not_found", booking_cancel, user=e23, booking_code=code)
    assert Booking.objects.get(code=code).status == BookingStatus.CONFIRMED


def test_admin_may_cancel_others_booking(e17, admin_user):
    code = reserve(e17).booking.code
    assert booking_cancel(user=admin_user, booking_code=code).cancelled_by == admin_user


def test_cancel_unknown_booking_is_not_found(e17):
    refused("not_found", "booking_not_found", booking_cancel, user=e17, booking_code="B1")


def test_search_finds_free_fitting_rooms_smallest_first(e17):
    start, end = slot()
    found = room_search(start_at=start, end_at=end, attendees=3, equipment=["projector"])
    assert [a.room.code for a in found][:2] == ["R7", "R9"]
    assert all(a.room.capacity >= 3 and "projector" in a.room.equipment for a in found)
    assert all(a.version == a.room.schedule_version for a in found)
    assert all(abs(a.observed_at - timezone.now()) < timedelta(seconds=5) for a in found)
    assert "R11" not in [a.room.code for a in found]  # not bookable


def test_search_leaves_out_rooms_booked_for_part_of_the_window(e17):
    reserve(e17, window=slot(hour=14, hours=1, minute=30), key="x")
    start, end = slot(hour=14, hours=1)
    found = [
        a.room.code
        for a in room_search(start_at=start, end_at=end, attendees=3, equipment=["projector"])
    ]
    assert "R7" not in found
    assert found[0] == "R9"


def test_search_applies_the_same_rules(e17):
    start, end = slot()
    with pytest.raises(BookingError, match="offset"):
        room_search(start_at=start.replace(tzinfo=None), end_at=end, attendees=2)
    with pytest.raises(BookingError, match="At least one"):
        room_search(start_at=start, end_at=end, attendees=0)


def test_exclusion_constraint_exists_in_database(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT contype FROM pg_constraint WHERE conname = 'booking_no_overlap'")
        assert cursor.fetchone() == ("x",)
