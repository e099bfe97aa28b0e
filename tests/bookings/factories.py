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
