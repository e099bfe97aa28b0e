"""Rules shared by the availability search and reservations. Pure functions: no queries."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings

from bookings.errors import BookingError

KNOWN_EQUIPMENT = ("projector", "whiteboard", "video", "phone", "display")


def normalize_equipment(equipment: Iterable[str]) -> list[str]:
    cleaned = sorted({e.strip().lower() for e in equipment if e and e.strip()})
    unknown = [e for e in cleaned if e not in KNOWN_EQUIPMENT]
    if unknown:
        raise BookingError(
            "invalid_input",
            "unknown_equipment",
            f"Unknown equipment: {', '.join(unknown)}.",
            f"Use any of: {', '.join(KNOWN_EQUIPMENT)}.",
        )
    return cleaned


def check_window(start_at: datetime, end_at: datetime, *, now: datetime) -> None:
    for label, value in (("start", start_at), ("end", end_at)):
        if not isinstance(value, datetime):
            raise BookingError("invalid_input", "not_a_datetime", f"The {label} time is missing.")
        if value.tzinfo is None or value.utcoffset() is None:
            raise BookingError(
                "invalid_input",
                "naive_datetime",
                f"The {label} time has no UTC offset.",
                "Send ISO 8601 with an offset, e.g. 2026-09-28T14:00:00+08:00.",
            )
    if end_at <= start_at:
        raise BookingError(
            "invalid_input",
            "end_not_after_start",
            "The end must be after the start.",
            "Swap or correct the times.",
        )
    if start_at < now:
        raise BookingError(
            "invalid_input",
            "start_in_past",
            "The start time is in the past.",
            "Choose a time from now on.",
        )
    horizon = timedelta(days=settings.BOOKING_HORIZON_DAYS)
    if start_at > now + horizon:
        raise BookingError(
            "invalid_input",
            "beyond_horizon",
            f"Rooms can be booked at most {settings.BOOKING_HORIZON_DAYS} days ahead.",
            "Choose an earlier date.",
        )
    if end_at - start_at > timedelta(hours=settings.BOOKING_MAX_HOURS):
        raise BookingError(
            "invalid_input",
            "too_long",
            f"A booking may last at most {settings.BOOKING_MAX_HOURS} hours.",
            "Split it into shorter bookings.",
        )


def check_attendees(attendees: int) -> None:
    if not isinstance(attendees, int) or isinstance(attendees, bool) or attendees < 1:
        raise BookingError(
            "invalid_input",
            "attendees_too_few",
            "At least one attendee is needed.",
            "Give the number of people, 1 or more.",
        )
