"""Turn an employee's booking request (English or Chinese) into booking constraints.

Pure functions, standard library only: no Django, no database. Booking rules (past dates,
horizon, opening hours, capacity) are the booking service's business, not this module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from bookings.assistant.parsing.attendees import INTENT, extract_attendees
from bookings.assistant.parsing.dates import extract_date
from bookings.assistant.parsing.intent import (
    named_beneficiary,
    wants_another_room,
    wants_cancel_or_change,
)
from bookings.assistant.parsing.text import CJK, extract_equipment, extract_room_codes, normalize
from bookings.assistant.parsing.times import (
    END_BEFORE_START,
    NO_END,
    at_minutes,
    extract_time_span,
    text_period,
)

EQUIPMENT = ("display", "phone", "projector", "video", "whiteboard")
FIELDS = ("date", "time", "attendees")
# Why a request cannot become a booking as asked, beside a missing or unusable field.
CANCEL_OR_CHANGE = "cancel_or_change"  # the assistant books; it does not cancel or change
FOR_SOMEONE_ELSE = "for_someone_else"  # it books only for the person asking


@dataclass(frozen=True)
class BookingRequest:
    start_at: datetime
    end_at: datetime
    attendees: int | None  # None only when several rooms are named (each is booked whole)
    equipment: tuple[str, ...]
    room_code: str | None
    language: str
    another_room: bool = False  # asked for a room in addition to one already held
    room_codes: tuple[str, ...] = ()  # a multi-room request: every room named (else empty)
    department: str | None = None  # only a room of this department ("an eng room")


@dataclass(frozen=True)
class Clarification:
    """What the request lacks (in the order of FIELDS); ``problem`` says why a time was unusable
    (END_BEFORE_START, NO_END) or why the request cannot be booked as asked (CANCEL_OR_CHANGE;
    FOR_SOMEONE_ELSE, then ``named`` is the employee id it names). The assistant's replies word
    the question."""

    missing: tuple[str, ...]
    language: str
    problem: str | None = None
    named: str | None = None


def request_language(text: str) -> str:
    """ "zh" when the text has any Chinese character, else "en"."""
    return "zh" if CJK.search(text) else "en"


def parse_booking_request(
    text: str, *, now: datetime, tz: ZoneInfo
) -> BookingRequest | Clarification:
    """Read date, time range, attendees, equipment and room code out of ``text``.

    ``now`` anchors relative dates ("tomorrow", "周五", "Sep 28"); a naive ``now`` is read as
    wall time in ``tz``. Return a Clarification naming every missing field (in the order of
    FIELDS) when the request is incomplete, has an end not after its start, or is not a booking
    request at all (then all three fields are missing); a Clarification with a problem and no
    missing field when it asks to cancel or change bookings, or to book for another employee.
    A day in the past is read as written: the booking service says it is past.
    """
    language = request_language(text)
    local_now = now.astimezone(tz) if now.tzinfo is not None else now.replace(tzinfo=tz)
    today = local_now.date()

    normalized = normalize(text)
    if wants_cancel_or_change(normalized):
        return Clarification((), language, CANCEL_OR_CHANGE)
    beneficiary = named_beneficiary(normalized)
    if beneficiary is not None:
        return Clarification((), language, FOR_SOMEONE_ELSE, named=beneficiary)
    room_codes, rest = extract_room_codes(normalized)
    room_code = room_codes[0] if room_codes else None
    several_rooms = len(room_codes) > 1
    equipment = extract_equipment(rest)
    day, rest = extract_date(rest, today)
    span, rest = extract_time_span(rest, text_period(normalized))
    attendees, rest = extract_attendees(rest)

    looks_like_booking = (
        bool(INTENT.search(normalized))
        or room_code is not None
        or bool(equipment)
        or attendees is not None
        or (day is not None and span.end is not None)
    )
    if not looks_like_booking:
        return Clarification(FIELDS, language)

    problem = span.problem
    start_at = end_at = None
    if day is not None and span.start is not None and span.end is not None:
        midnight = datetime(day.year, day.month, day.day, tzinfo=tz)
        start_at = at_minutes(midnight, span.start)
        end_at = at_minutes(midnight, span.end)
        if end_at <= start_at:
            problem = END_BEFORE_START

    missing = tuple(
        name
        for name, absent in (
            ("date", day is None),
            ("time", problem is not None or span.start is None or span.end is None),
            ("attendees", attendees is None and not several_rooms),
        )
        if absent
    )
    if missing or start_at is None or end_at is None:
        return Clarification(missing, language, problem)
    return BookingRequest(
        start_at=start_at,
        end_at=end_at,
        attendees=attendees,
        equipment=equipment,
        room_code=room_code,
        language=language,
        another_room=wants_another_room(normalized),
        room_codes=room_codes if several_rooms else (),
    )


__all__ = [
    "CANCEL_OR_CHANGE",
    "END_BEFORE_START",
    "EQUIPMENT",
    "FIELDS",
    "FOR_SOMEONE_ELSE",
    "NO_END",
    "BookingRequest",
    "Clarification",
    "parse_booking_request",
    "request_language",
]
