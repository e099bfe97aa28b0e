"""Rooms and bookings, built per test."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from datetime import datetime

from bookings.models import Booking, Room
from bookings.services import booking_cancel, booking_reserve

_serial = itertools.count(1)


def room_create(
    code: str | None = None,
    *,
    name: str = "",
    capacity: int = 4,
    equipment: Sequence[str] = (),
    department: str = "Engineering",
    floor: int = 1,
    notes: str = "",
    bookable: bool = True,
    requires_approval: bool = False,
) -> Room:
    code = code or f"X{next(_serial)}"  # never an R-code: tests use R99 as an unknown room
    return Room.objects.create(
        code=code,
        name=name or f"Room {code}",
        capacity=capacity,
        equipment=list(equipment),
        department=department,
        floor=floor,
        notes=notes,
        bookable=bookable,
        requires_approval=requires_approval,
    )


def booking_create(
    *,
    requester,
    room: Room | str,
    start_at: datetime,
    end_at: datetime,
    attendees: int = 1,
    idempotency_key: str | None = None,
    cancelled: bool = False,
) -> Booking:
    """Book through the booking service, so the room's schedule version moves as in the
    product; `cancelled=True` cancels it again as its requester."""
    result = booking_reserve(
        user=requester,
        room_code=room.code if isinstance(room, Room) else room,
        start_at=start_at,
        end_at=end_at,
        attendees=attendees,
        idempotency_key=idempotency_key or f"factory-{uuid.uuid4()}",
    )
    if cancelled:
        return booking_cancel(user=requester, booking_code=result.booking.code)
    return result.booking


# --- realistic volume: one line each --------------------------------------------------------------

SLOT_HOURS = range(8, 19)  # person_with_bookings: one booking an hour, 08:00 to 19:00


def person_with_bookings(
    person, count: int, *, room: Room | None = None, first_day: int = 2
) -> list[Booking]:
    """``count`` confirmed bookings of ``person`` through the booking service, one an hour
    (SLOT_HOURS) in ``room`` (a new one if not given) from ``first_day`` days ahead, in the
    order they are returned: made first, first. list_my_bookings lists the newest first, so
    the k-th it lists is ``result[-k]``."""
    from tests.conftest import slot

    room = room or room_create()
    per_day = len(SLOT_HOURS)
    made = []
    for n in range(count):
        start, end = slot(days=first_day + n // per_day, hour=SLOT_HOURS[n % per_day])
        made.append(booking_create(requester=person, room=room, start_at=start, end_at=end))
    return made


def site_with_rooms(count: int, *, first_code: int = 1000, **spec) -> list[Room]:
    """A site of ``count`` rooms R<first_code>.. (all alike: ``spec`` as room_create takes it),
    in one statement."""
    rooms = [
        Room(
            code=f"R{first_code + n}",
            name=spec.get("name") or f"Room {first_code + n}",
            capacity=spec.get("capacity", 4),
            equipment=list(spec.get("equipment", ())),
            department=spec.get("department", "Engineering"),
            floor=spec.get("floor", 1),
            notes=spec.get("notes", ""),
            bookable=spec.get("bookable", True),
            requires_approval=spec.get("requires_approval", False),
        )
        for n in range(count)
    ]
    return Room.objects.bulk_create(rooms)
