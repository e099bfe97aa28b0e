"""The booking tools as the model sees them, through the governed direct call."""

from __future__ import annotations

import pytest

from agentops.runtime.direct import tool_call_governed
from bookings.services import booking_reserve
from tests.conftest import slot

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("rooms")
def test_room_notes_reach_the_model_only_as_short_quoted_data(e17):
    start, end = slot(days=3)
    envelope = tool_call_governed(
        user=e17,
        name="find_available_rooms",
        arguments={
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": 4,
            "equipment": ["whiteboard"],
        },
    )

    rooms = {r["room_id"]: r for r in envelope["data"]["rooms"]}
    assert "R12" in rooms
    quote = rooms["R12"]["notes_quote"]
    assert quote.startswith('"') and quote.endswith('"') and len(quote) <= 82
    assert "ignore previous rules" in quote  # kept as data, verbatim...
    assert set(rooms["R12"]) == {
        "room_id",
        "name",
        "capacity",
        "equipment",
        "floor",
        "department",
        "requires_approval",
        "version",
        "notes_quote",
    }  # ...and nowhere else


@pytest.mark.usefixtures("rooms")
def test_list_my_bookings_pages_with_a_cursor(e17, e23):
    for hour in range(8, 20):
        start, end = slot(days=3, hour=hour)
        booking_reserve(
            user=e17,
            room_code="R1",
            start_at=start,
            end_at=end,
            attendees=1,
            idempotency_key=f"k{hour}",
        )
    booking_reserve(
        user=e23, room_code="R2", start_at=start, end_at=end, attendees=1, idempotency_key="other"
    )

    first = tool_call_governed(user=e17, name="list_my_bookings", arguments={})
    assert len(first["data"]["bookings"]) == 10 and first["data"]["has_more"]
    assert first["next_cursor"] == first["data"]["next_cursor"]
    second = tool_call_governed(
        user=e17, name="list_my_bookings", arguments={"cursor": first["next_cursor"]}
    )
    assert len(second["data"]["bookings"]) == 2 and not second["data"]["has_more"]
    codes = [b["booking_id"] for b in first["data"]["bookings"] + second["data"]["bookings"]]
    assert len(set(codes)) == 12  # all of e17's, none of e23's, no repeats


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"limit": 51}, "schema_violation"),
        ({"limit": 0}, "schema_violation"),
        ({"cursor": "not-a-cursor"}, "bad_cursor"),
    ],
)
def test_list_my_bookings_refuses_bad_paging(e17, arguments, code):
    envelope = tool_call_governed(user=e17, name="list_my_bookings", arguments=arguments)
    assert (envelope["signal"], envelope["reason"], envelope["code"]) == (
        "red",
        "invalid_input",
        code,
    )


@pytest.mark.usefixtures("rooms")
def test_get_booking_of_someone_else_reads_as_not_found(e17, e23):
    start, end = slot(days=3)
    code = booking_reserve(
        user=e23, room_code="R7", start_at=start, end_at=end, attendees=2, idempotency_key="theirs"
    ).booking.code

    envelope = tool_call_governed(user=e17, name="get_booking", arguments={"booking_id": code})
    assert (envelope["reason"], envelope["code"]) == ("not_found", "booking_not_found")
    mine = tool_call_governed(user=e23, name="get_booking", arguments={"booking_id": code})
    assert mine["ok"] and mine["data"]["room_id"] == "R7"


def test_demo_data_loads_twice_without_change(db):
    from accounts.models import User
    from bookings.demo import load_demo_data
    from bookings.models import Room

    load_demo_data()
    before = (list(Room.objects.values_list("code", "schedule_version")), User.objects.count())
    load_demo_data()
    assert (
        list(Room.objects.values_list("code", "schedule_version")),
        User.objects.count(),
    ) == before
    assert Room.objects.count() >= 12
    assert set(Room.objects.values_list("department", flat=True)) == {"Engineering", "Sales"}
    assert set(Room.objects.values_list("floor", flat=True)) == {3, 5}
