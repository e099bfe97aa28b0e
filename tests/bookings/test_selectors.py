"""The domain's hot reads are hand-written statements (bookings/selectors.py); each must read
exactly what the queryset it replaced reads. The querysets are kept here as the reference."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import Exists, OuterRef, Q, Value

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


def _reference_named(*, code, user, start_at, end_at) -> tuple[Room, bool] | None:
    """What _named_room read before room_named: room_get, then room_is_free."""
    in_sandbox = (
        Value(False)
        if user is None
        else Exists(Group.objects.filter(user__pk=user.pk, name=Role.SANDBOX))
    )
    room = Room.objects.filter(code=code, sandbox=in_sandbox).first()
    if room is None:
        return None
    free = not Booking.objects.filter(
        room=room,
        status=BookingStatus.CONFIRMED,
        during__overlap=DateTimeTZRange(start_at, end_at, "[)"),
    ).exists()
    return room, free


@pytest.mark.parametrize("name", ["small", "shut", "taken", "before", "after", "freed", "drill"])
@pytest.mark.parametrize("who", ["e17", "drill", "nobody"])
def test_a_named_room_reads_what_the_querysets_read(world, e17, name, who):
    user = {"e17": e17, "drill": world["drill"], "nobody": None}[who]
    code = world["rooms"][name].code
    window = {"start_at": world["start"], "end_at": world["end"]}
    found = selectors.room_named(code=code, user=user, **window)
    reference = _reference_named(code=code, user=user, **window)
    if reference is None:
        assert found is None
    else:
        assert found is not None
        assert _rows([found[0]]) == _rows([reference[0]]) and found[1] == reference[1]
    assert selectors.room_named(code="NOPE", user=user, **window) is None


def test_a_named_room_is_free_or_not_as_its_bookings_say(world, e17):
    window = {"start_at": world["start"], "end_at": world["end"]}
    free = {
        name: selectors.room_named(code=world["rooms"][name].code, user=e17, **window)[1]
        for name in ("small", "taken", "before", "after", "freed")
    }
    # Booked by anyone in the window, or overlapping its end: taken; touching its start, or
    # cancelled: free.
    assert free == {"small": True, "taken": False, "before": True, "after": False, "freed": True}
    assert selectors.room_named(code=world["rooms"]["drill"].code, user=e17, **window) is None


def _reference_recheck(*, code, start_at, end_at, key, expected):
    """What reserve_recheck read before room_recheck: the room, the first confirmed booking
    holding the window, and (bookings_window_moved) a booking made or cancelled since."""
    room = Room.objects.filter(code=code).first()
    if room is None:
        return None
    window = DateTimeTZRange(start_at, end_at, "[)")
    taken = (
        Booking.objects.filter(room=room, status=BookingStatus.CONFIRMED, during__overlap=window)
        .exclude(idempotency_key=key)
        .order_by("during")
        .first()
    )
    moved = (
        Booking.objects.filter(room=room, during__overlap=window)
        .filter(Q(created_version__gt=expected) | Q(cancelled_version__gt=expected))
        .exclude(idempotency_key=key)
        .exists()
    )
    return (
        room.code,
        room.bookable,
        room.capacity,
        room.schedule_version,
        (taken.during.lower, taken.during.upper) if taken is not None else None,
        moved,
    )


def test_a_reservations_recheck_reads_what_the_querysets_read(world):
    rooms = world["rooms"]
    start, end = world["start"], world["end"]
    keys = {b.room_id: b.idempotency_key for b in Booking.objects.all()}
    cases = 0
    for room in Room.objects.filter(pk__in=[r.pk for r in rooms.values()]):
        for key in ("-", keys.get(room.pk, "-")):
            for expected in (0, max(room.schedule_version - 1, 0), room.schedule_version, 99):
                for window in ((start, end), (start - timedelta(hours=2), start)):
                    args = {"start_at": window[0], "end_at": window[1], "key": key}
                    got = selectors.room_recheck(code=room.code, expected=expected, **args)
                    reference = _reference_recheck(code=room.code, expected=expected, **args)
                    assert got is not None
                    fields = (
                        got.code,
                        got.bookable,
                        got.capacity,
                        got.schedule_version,
                        got.taken,
                        got.moved,
                    )
                    assert fields == reference, (room.code, key, expected, window)
                    cases += 1
    assert cases == len(rooms) * 2 * 4 * 2
    assert (
        selectors.room_recheck(code="NOPE", expected=0, start_at=start, end_at=end, key="-") is None
    )


def test_a_reservations_recheck_sees_the_holder_and_the_move(world):
    rooms, start, end = world["rooms"], world["start"], world["end"]
    taken = Booking.objects.get(room=rooms["taken"], status=BookingStatus.CONFIRMED)
    window = {"start_at": start, "end_at": end}
    seen = selectors.room_recheck(code=rooms["taken"].code, expected=0, key="-", **window)
    assert seen.taken == (taken.during.lower, taken.during.upper) and seen.moved
    # Its own key is not in its way, and a version read after the booking saw it already.
    own = selectors.room_recheck(
        code=rooms["taken"].code,
        expected=rooms["taken"].schedule_version,
        key=taken.idempotency_key,
        **window,
    )
    assert own.taken is None and not own.moved
    # A booking cancelled after the version the request read moved the window; before, not.
    freed = Room.objects.get(pk=rooms["freed"].pk)
    assert selectors.room_recheck(code=freed.code, expected=0, key="-", **window).moved
    late = selectors.room_recheck(
        code=freed.code, expected=freed.schedule_version, key="-", **window
    )
    assert late.taken is None and not late.moved
