"""The booking tools' handlers: parse -> booking service/selector -> envelope."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agentops.contract import CallContext, Reason, ToolError, page_fitted, success
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
    ReserveRoomInput,
    ReserveRoomOutput,
    RoomCandidate,
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


def _page_too_large(tool: str) -> ToolError:
    """Not even one item fits the tool's size cap: a page of none could not move on."""
    return ToolError(
        Reason.OUTPUT_TOO_LARGE,
        "page_too_large",
        f"One item of {tool} is larger than its answer may be.",
        "Report it: this list cannot be read through this tool.",
    )


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
    # The pages' order is (capacity, code), compared as the cursor compares it.
    found.sort(key=lambda a: (a.room.capacity, a.room.code))
    after = selectors.room_cursor_decode(args.cursor) if args.cursor else None
    if after is not None:  # the page starts after that room
        found = [a for a in found if (a.room.capacity, a.room.code) > after]
    page, more = found[: args.limit], len(found) > args.limit
    rooms = [
        RoomCandidate.model_validate(
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
        ).model_dump(mode="json")
        for a in page
    ]
    rest = FindAvailableRoomsOutput.model_validate(
        {
            "rooms": [],
            "observed_at": observed_at,
            "truncated": False,
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
    ).model_dump(mode="json")

    def answer(n: int) -> dict[str, Any]:
        has_more = more or n < len(page)
        last = page[n - 1].room if n else None
        cursor = (
            selectors.room_cursor_encode(last.capacity, last.code)
            if has_more and last is not None
            else None
        )
        data = rest | {
            "rooms": rooms[:n],
            "truncated": has_more,
            "has_more": has_more,
            "next_cursor": cursor,
        }
        return success(data, next_cursor=cursor, observed_at=observed_at)

    shown, envelope = page_fitted(len(rooms), answer, ctx.max_output_bytes)
    if rooms and not shown:
        raise _page_too_large("find_available_rooms")
    return envelope


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
    fits = room.capacity >= args.attendees and set(args.equipment) <= set(room.equipment)
    return {
        "room_id": room.code,
        "exists": True,
        "bookable": room.bookable,
        "capacity": room.capacity,
        "equipment": room.equipment,
        "free": free,
        "available": room.bookable and fits and free,
        "version": room.schedule_version,
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
    page = selectors.booking_list_for_user(
        user=ctx.user,
        limit=args.limit,
        cursor=args.cursor,
        start_at=args.from_,
        end_at=args.to,
    )
    bookings = [
        BookingOut.model_validate(booking_out(b)).model_dump(mode="json") for b in page.items
    ]

    def answer(n: int) -> dict[str, Any]:
        # Fewer than read (the cap): more follow, from just after the last one listed.
        has_more = page.has_more or n < len(bookings)
        cursor = selectors.booking_cursor_encode(page.items[n - 1].id) if has_more and n else None
        data = {"bookings": bookings[:n], "next_cursor": cursor, "has_more": has_more}
        return success(data, next_cursor=cursor)

    shown, envelope = page_fitted(len(bookings), answer, ctx.max_output_bytes)
    if bookings and not shown:
        raise _page_too_large("list_my_bookings")
    return envelope
