"""What find_available_rooms tells beside the free rooms: the room the person named, how big
the largest room is when none fits, and the caller's own bookings at that time (only theirs)."""

from __future__ import annotations

from datetime import datetime

import pytest

from agentops.runtime.direct import tool_call_governed
from bookings.models import Booking, Room
from tests.bookings.factories import booking_create
from tests.conftest import slot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]

START, END = slot(days=3, hour=10)


def search(user, **extra) -> dict:
    arguments = {"start_at": START.isoformat(), "end_at": END.isoformat(), "attendees": 2}
    envelope = tool_call_governed(
        user=user, name="find_available_rooms", arguments=arguments | extra
    )
    assert envelope["ok"], envelope
    return envelope["data"]


def test_a_named_room_is_reported_as_the_database_has_it(e17, e23):
    booking_create(requester=e23, room="R9", start_at=START, end_at=END)

    reports = {code: search(e17, room_id=code)["named_room"] for code in ("R11", "R9", "R7")}
    assert reports["R11"] == {
        "room_id": "R11",
        "exists": True,
        "bookable": False,
        "capacity": 6,
        "equipment": [],
        "free": True,
        "available": False,  # free, but not open for booking
        "version": 0,
    }
    assert (reports["R9"]["bookable"], reports["R9"]["free"]) == (True, False)
    assert reports["R9"]["available"] is False
    assert (reports["R7"]["capacity"], reports["R7"]["free"]) == (4, True)
    assert reports["R7"]["available"] is True
    assert reports["R7"]["version"] == Room.objects.get(code="R7").schedule_version
    # Free, but it does not seat them or lacks what they need: not available.
    assert search(e17, room_id="R1", attendees=3)["named_room"]["available"] is False
    assert search(e17, room_id="R7", equipment=["whiteboard"])["named_room"]["available"] is False
    assert search(e17)["named_room"] is None


def test_an_unknown_room_is_reported_as_missing_and_the_search_still_lists_free_rooms(e17):
    data = search(e17, room_id="R9999")

    assert data["named_room"] == {
        "room_id": "R9999",
        "exists": False,
        "bookable": False,
        "capacity": None,
        "equipment": [],
        "free": False,
        "available": False,
        "version": None,
    }
    assert {"R1", "R2", "R3", "R7"} <= {r["room_id"] for r in data["rooms"]}


def test_a_room_code_that_is_not_one_is_refused_by_the_schema(e17):
    arguments = {"start_at": START.isoformat(), "end_at": END.isoformat(), "attendees": 2}
    envelope = tool_call_governed(
        user=e17, name="find_available_rooms", arguments=arguments | {"room_id": "'; drop"}
    )

    assert (envelope["ok"], envelope["reason"]) == (False, "invalid_input")


def test_the_largest_capacity_is_given_only_when_no_room_fits(e17):
    assert search(e17)["largest_capacity"] is None
    assert search(e17, attendees=17)["largest_capacity"] == 16
    Room.objects.filter(code="R16").update(bookable=False)
    assert search(e17, attendees=17)["largest_capacity"] == 10  # only bookable rooms count


def test_own_bookings_are_the_callers_confirmed_ones_that_overlap(e17, e23):
    mine = booking_create(requester=e17, room="R9", start_at=START, end_at=END)
    booking_create(requester=e17, room="R7", start_at=START, end_at=END, cancelled=True)
    booking_create(requester=e23, room="R3", start_at=START, end_at=END)
    later_start, later_end = slot(days=3, hour=12)
    booking_create(requester=e17, room="R1", start_at=later_start, end_at=later_end)

    own = search(e17)["own_bookings"]
    assert [
        (
            b["booking_id"],
            b["room_id"],
            datetime.fromisoformat(b["start_at"]),
            datetime.fromisoformat(b["end_at"]),
        )
        for b in own
    ] == [(mine.code, "R9", START, END)]
    assert search(e23)["own_bookings"][0]["room_id"] == "R3"  # never someone else's
    assert Booking.objects.count() == 4  # a search writes nothing
