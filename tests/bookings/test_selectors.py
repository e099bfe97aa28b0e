"""The domain's hot reads are hand-written statements (bookings/selectors.py); each must read
exactly what the queryset it replaced reads. The querysets are kept here as the reference."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import Exists, OuterRef, Value

from accounts.models import Role
from bookings import selectors
from bookings.models import Booking, BookingStatus, Room
from tests.accounts.factories import EMPLOYEES, user_create
from tests.bookings.factories import booking_create, room_create
from tests.conftest import slot

pytestmark = pytest.mark.django_db


def _reference_search(*, start_at, end_at, attendees, equipment, user) -> list[Room]:
    in_sandbox = (
        Value(False)
        if user is None
        else Exists(Group.objects.filter(user__pk=user.pk, name=Role.SANDBOX))
    )
    taken = Booking.objects.filter(
        room=OuterRef("pk"),
        status=BookingStatus.CONFIRMED,
        during__overlap=DateTimeTZRange(start_at, end_at, "[)"),
    )
    return list(
        Room.objects.filter(bookable=True, capacity__gte=attendees, equipment__contains=equipment)
        .filter(sandbox=in_sandbox)
        .filter(~Exists(taken))
        .order_by("capacity", "code")
    )


def _rows(objects) -> list[tuple]:
    """Every column of every object, in order (a model's == compares primary keys only)."""
    return [tuple(getattr(o, f.attname) for f in type(o)._meta.concrete_fields) for o in objects]


@pytest.fixture
def world(e17, e23):
    """Rooms of every kind, bookings that touch the window on each side, and a drill user."""
    start, end = slot(days=3, hour=10)
    rooms = {
        "small": room_create(capacity=2, equipment=["projector"]),
        "fits": room_create(capacity=4, equipment=["projector", "whiteboard"]),
        "also": room_create(capacity=4, equipment=["projector"]),
        "bare": room_create(capacity=8),
        "shut": room_create(capacity=8, equipment=["projector"], bookable=False),
        "taken": room_create(capacity=6, equipment=["projector"]),
        "before": room_create(capacity=6, equipment=["projector"]),
        "after": room_create(capacity=6, equipment=["projector"]),
        "freed": room_create(capacity=6, equipment=["projector"]),
        "drill": room_create(capacity=6, equipment=["projector"]),
    }
    Room.objects.filter(pk=rooms["drill"].pk).update(sandbox=True)
    booking_create(requester=e23, room=rooms["taken"], start_at=start, end_at=end)
    booking_create(
        requester=e17, room=rooms["before"], start_at=start - timedelta(hours=1), end_at=start
    )  # ends as the window starts: [) does not overlap
    booking_create(
        requester=e17,
        room=rooms["after"],
        start_at=end - timedelta(minutes=30),
        end_at=end + timedelta(hours=1),
    )
    booking_create(requester=e17, room=rooms["freed"], start_at=start, end_at=end, cancelled=True)
    booking_create(
        requester=e17,
        room=rooms["fits"],
        start_at=start - timedelta(minutes=30),
        end_at=start + timedelta(minutes=15),
    )
    drill = user_create("drill1", roles=[EMPLOYEES, Role.SANDBOX])
    return {"start": start, "end": end, "rooms": rooms, "drill": drill}


@pytest.mark.parametrize("equipment", [[], ["projector"], ["projector", "whiteboard"], ["video"]])
@pytest.mark.parametrize("attendees", [1, 3, 7, 50])
@pytest.mark.parametrize("who", ["e17", "drill", "nobody"])
def test_room_search_reads_what_the_queryset_read(world, e17, who, attendees, equipment):
    user = {"e17": e17, "drill": world["drill"], "nobody": None}[who]
    window = {"start_at": world["start"], "end_at": world["end"]}
    found = selectors.room_search(**window, attendees=attendees, equipment=equipment, user=user)
    reference = _reference_search(
        **window, attendees=attendees, equipment=sorted(set(equipment)), user=user
    )
    assert _rows([a.room for a in found]) == _rows(reference)
    assert [a.version for a in found] == [r.schedule_version for r in reference]


def test_room_search_keeps_real_and_drill_rooms_apart(world, e17):
    window = {"start_at": world["start"], "end_at": world["end"], "attendees": 3}
    mine = {a.room.code for a in selectors.room_search(**window, equipment=[], user=e17)}
    drill = {a.room.code for a in selectors.room_search(**window, user=world["drill"])}
    rooms = world["rooms"]
    assert drill == {rooms["drill"].code}
    assert rooms["drill"].code not in mine
    # Free and fitting; the booked (by anyone), the shut and the too small ones are not.
    assert {rooms[k].code for k in ("also", "bare", "before", "freed")} <= mine
    assert not {rooms[k].code for k in ("fits", "taken", "shut", "after", "drill", "small")} & mine


@pytest.mark.parametrize("limit", [1, 5])
def test_own_overlapping_bookings_read_what_the_queryset_read(world, e17, e23, limit):
    for user in (e17, e23):
        found = selectors.booking_list_overlapping(
            user=user, start_at=world["start"], end_at=world["end"], limit=limit
        )
        reference = list(
            Booking.objects.select_related("room")
            .filter(
                requester=user,
                status=BookingStatus.CONFIRMED,
                during__overlap=DateTimeTZRange(world["start"], world["end"], "[)"),
            )
            .order_by("during", "id")[:limit]
        )
        assert _rows(found) == _rows(reference)
        assert _rows(b.room for b in found) == _rows(b.room for b in reference)
    mine = selectors.booking_list_overlapping(
        user=e17, start_at=world["start"], end_at=world["end"]
    )
    assert [b.room.code for b in mine] == [
        world["rooms"]["fits"].code,
        world["rooms"]["after"].code,
    ]


def test_a_booking_is_found_by_its_key_with_its_room(world, e17):
    booking = Booking.objects.filter(requester=e17).order_by("id").first()
    found = selectors.booking_get_by_key(idempotency_key=booking.idempotency_key)
    reference = Booking.objects.select_related("room").get(pk=booking.pk)
    assert _rows([found]) == _rows([reference])
    assert _rows([found.room]) == _rows([reference.room])
    assert type(found.during) is type(reference.during)  # a range object, as the ORM gives it
    assert selectors.booking_get_by_key(idempotency_key="no-such-key") is None


def test_room_names_read_what_the_queryset_read(world):
    reference = list(
        Room.objects.filter(sandbox=False).order_by("code").values_list("code", "name", "bookable")
    )
    names = selectors.room_names()
    assert names == reference
    assert world["rooms"]["shut"].code in {code for code, _, _ in names}  # not bookable: named
    assert world["rooms"]["drill"].code not in {code for code, _, _ in names}
