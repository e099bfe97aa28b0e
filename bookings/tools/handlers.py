"""The booking tools' handlers: parse -> booking service/selector -> envelope."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agentops.contract import CallContext, ToolError, success
from bookings import selectors, services
from bookings.errors import BookingError
from bookings.models import Booking, BookingChange
from bookings.rules import DEFAULT_ATTENDEES
from bookings.tools.schemas import (
    BookingOut,
    BookingRef,
    ChangeBookingInput,
    ChangeBookingOutput,
    FindAvailableRoomsInput,
    FindAvailableRoomsOutput,
    ListMyBookingsInput,
    ListMyBookingsOutput,
    ReserveRoomInput,
    ReserveRoomOutput,
)

NOTES_MAX = 80


# --- helpers ----------------------------------------------------------------------------------


def _quote(notes: str) -> str:
    text = re.sub(r"\s+", " ", re.sub(r"[\x00-\x1f\x7f]", " ", notes)).strip()
    if len(text) > NOTES_MAX:
        text = text[: NOTES_MAX - 1] + "…"
    return f'"{text}"' if text else ""


def booking_out(b: Booking, room_code: str | None = None) -> dict[str, Any]:
    return {
        "booking_id": b.code,
        "room_id": room_code or b.room.code,
        "start_at": b.during.lower,
        "end_at": b.during.upper,
        "attendees": b.attendees,
        "status": b.status,
    }


def _domain_errors[**P, R](fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except BookingError as exc:
            raise ToolError(
                exc.reason, exc.code, exc.message, exc.hint, detail=exc.as_detail()
            ) from exc

    return wrapper


# --- handlers ---------------------------------------------------------------------------------


@_domain_errors
def find_available_rooms(ctx: CallContext, args: FindAvailableRoomsInput) -> dict[str, Any]:
    found = selectors.room_search(
        start_at=args.start_at,
        end_at=args.end_at,
        attendees=args.attendees,
        equipment=args.equipment,
        user=ctx.user,
    )
    observed_at = found[0].observed_at if found else datetime.now().astimezone()
    after = selectors.room_cursor_decode(args.cursor) if args.cursor else None
    if after is not None:  # the order is (capacity, code): the page starts after that room
        found = [a for a in found if (a.room.capacity, a.room.code) > after]
    page, more = found[: args.limit], len(found) > args.limit
    rooms = [
        {
            "room_id": a.room.code,
            "name": a.room.name,
            "capacity": a.room.capacity,
            "equipment": a.room.equipment,
            "floor": a.room.floor,
            "department": a.room.department,
            "requires_approval": a.room.requires_approval,
            "version": a.version,
            "notes_quote": _quote(a.room.notes),
        }
        for a in page
    ]
    data = {
        "rooms": rooms,
        "observed_at": observed_at,
        "truncated": more,
        "has_more": more,
        "next_cursor": (
            selectors.room_cursor_encode(page[-1].room.capacity, page[-1].room.code)
            if more
            else None
        ),
        "named_room": _named_room(ctx, args, args.room_id) if args.room_id else None,
        "largest_capacity": None if found else selectors.room_largest_capacity(user=ctx.user),
        "own_bookings": [
            {
                "booking_id": b.code,
                "room_id": b.room.code,
                "start_at": b.during.lower,
                "end_at": b.during.upper,
            }
            for b in selectors.booking_list_overlapping(
                user=ctx.user, start_at=args.start_at, end_at=args.end_at
            )
        ],
    }
    return success(
        FindAvailableRoomsOutput.model_validate(data).model_dump(mode="json"),
        observed_at=observed_at,
    )


def _named_room(ctx: CallContext, args: FindAvailableRoomsInput, code: str) -> dict[str, Any]:
    """What stands between the person and the room they named (``code``), as the database has
    it (a room across the sandbox line does not exist for them)."""
    named = selectors.room_named(
        code=code, user=ctx.user, start_at=args.start_at, end_at=args.end_at
    )
    if named is None:
        return {
            "room_id": code,
            "exists": False,
            "bookable": False,
            "capacity": None,
            "equipment": [],
            "free": False,
        }
    room, free = named
    return {
        "room_id": room.code,
        "exists": True,
        "bookable": room.bookable,
        "capacity": room.capacity,
        "equipment": room.equipment,
        "free": free,
    }


@_domain_errors
def reserve_room(ctx: CallContext, args: ReserveRoomInput) -> dict[str, Any]:
    # Optional, as its schema says (seed 000's four fields book): the head count the request
    # delegated, else the person booking alone.
    attendees = args.attendees or ctx.delegation.attendees or DEFAULT_ATTENDEES
    res = services.booking_reserve(
        user=ctx.user,
        room_code=args.room_id,
        start_at=args.start_at,
        end_at=args.end_at,
        attendees=attendees,
        equipment=args.equipment,
        expected_version=args.expected_version,
        idempotency_key=ctx.idempotency_key,
        run_id=ctx.run_id,
        action_id=ctx.action_id,
        title=args.title,
    )
    data = booking_out(res.booking, res.room_code) | {"replayed": res.replayed}
    return success(ReserveRoomOutput.model_validate(data).model_dump(mode="json"))


@_domain_errors
def cancel_booking(ctx: CallContext, args: BookingRef) -> dict[str, Any]:
    booking = services.booking_cancel(
        user=ctx.user, booking_code=args.booking_id, idempotency_key=ctx.idempotency_key
    )
    return success(BookingOut.model_validate(booking_out(booking)).model_dump(mode="json"))


def change_out(change: BookingChange, booking: Booking) -> dict[str, Any]:
    return {
        "booking_id": booking.code,
        "room_id": change.to_room.code,
        "start_at": change.to_during.lower,
        "end_at": change.to_during.upper,
        "attendees": change.to_attendees,
        "status": booking.status,
        "title": change.to_title,
        "from_room_id": change.from_room.code,
        "from_start_at": change.from_during.lower,
        "from_end_at": change.from_during.upper,
    }


@_domain_errors
def change_booking(ctx: CallContext, args: ChangeBookingInput) -> dict[str, Any]:
    done = services.booking_change(
        user=ctx.user,
        booking_code=args.booking_id,
        room_code=args.room_id,
        start_at=args.start_at,
        end_at=args.end_at,
        attendees=args.attendees,
        title=args.title,
        expected_version=args.expected_version,
        idempotency_key=ctx.idempotency_key,
        run_id=ctx.run_id,
        action_id=ctx.action_id,
    )
    data = change_out(done.receipt, done.booking) | {"replayed": done.replayed}
    return success(ChangeBookingOutput.model_validate(data).model_dump(mode="json"))


@_domain_errors
def get_booking(ctx: CallContext, args: BookingRef) -> dict[str, Any]:
    booking = selectors.booking_get(user=ctx.user, code=args.booking_id)
    return success(BookingOut.model_validate(booking_out(booking)).model_dump(mode="json"))


@_domain_errors
def list_my_bookings(ctx: CallContext, args: ListMyBookingsInput) -> dict[str, Any]:
    page = selectors.booking_list_for_user(user=ctx.user, limit=args.limit, cursor=args.cursor)
    data = {
        "bookings": [booking_out(b) for b in page.items],
        "next_cursor": page.next_cursor,
        "has_more": page.has_more,
    }
    return success(
        ListMyBookingsOutput.model_validate(data).model_dump(mode="json"),
        next_cursor=page.next_cursor,
    )
