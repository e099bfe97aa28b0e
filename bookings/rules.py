"""Rules shared by the availability search and reservations. Pure functions: no queries."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.utils.functional import Promise, lazy
from django.utils.translation import gettext_noop, pgettext, pgettext_lazy

from accounts.typed import TypedField, UncleanText, typed_text
from bookings.errors import BookingError

KNOWN_EQUIPMENT = ("projector", "whiteboard", "video", "phone", "display")
MAX_ATTENDEES = 500  # the most people one search or booking may name
DEFAULT_ATTENDEES = 1  # a booking that names no head count: the person booking
# What the screens call each item; the stored names above stay English.
EQUIPMENT_LABELS: dict[str, Promise] = {
    "projector": pgettext_lazy("equipment", "projector"),
    "whiteboard": pgettext_lazy("equipment", "whiteboard"),
    "video": pgettext_lazy("equipment", "video"),
    "phone": pgettext_lazy("equipment", "phone"),
    "display": pgettext_lazy("equipment", "display"),
}


def equipment_label(name: str) -> Promise | str:
    """The label of a known item in the active language; an unknown name as it is."""
    return EQUIPMENT_LABELS.get(name, name)


def _join_labels(names: Iterable[str]) -> str:
    separator = pgettext("list separator", ", ")
    return separator.join(str(equipment_label(name)) for name in names)


# The items' labels joined the way the active language lists them, evaluated when rendered.
equipment_list = lazy(_join_labels, str)


def normalize_equipment(equipment: Iterable[str]) -> list[str]:
    cleaned = sorted({e.strip().lower() for e in equipment if e and e.strip()})
    unknown = [e for e in cleaned if e not in KNOWN_EQUIPMENT]
    if unknown:
        raise BookingError(
            "invalid_input",
            "unknown_equipment",
            gettext_noop("Unknown equipment: %(unknown)s."),
            gettext_noop("Use any of: %(known)s."),
            params={"unknown": ", ".join(unknown), "known": equipment_list(KNOWN_EQUIPMENT)},
        )
    return cleaned


def check_window(start_at: datetime, end_at: datetime, *, now: datetime) -> None:
    for value, missing, naive in (
        (
            start_at,
            gettext_noop("The start time is missing."),
            gettext_noop("The start time has no UTC offset."),
        ),
        (
            end_at,
            gettext_noop("The end time is missing."),
            gettext_noop("The end time has no UTC offset."),
        ),
    ):
        if not isinstance(value, datetime):
            raise BookingError("invalid_input", "not_a_datetime", missing)
        if value.tzinfo is None or value.utcoffset() is None:
            raise BookingError(
                "invalid_input",
                "naive_datetime",
                naive,
                gettext_noop("Send ISO 8601 with an offset, e.g. 2026-09-28T14:00:00+08:00."),
            )
    if end_at <= start_at:
        raise BookingError(
            "invalid_input",
            "end_not_after_start",
            gettext_noop("The end must be after the start."),
            gettext_noop("Swap or correct the times."),
        )
    if start_at < now:
        raise BookingError(
            "invalid_input",
            "start_in_past",
            gettext_noop("The start time is in the past."),
            gettext_noop("Choose a time from now on."),
        )
    horizon = timedelta(days=settings.BOOKING_HORIZON_DAYS)
    if start_at > now + horizon:
        raise BookingError(
            "invalid_input",
            "beyond_horizon",
            gettext_noop("Rooms can be booked at most %(days)d days ahead."),
            gettext_noop("Choose an earlier date."),
            params={"days": settings.BOOKING_HORIZON_DAYS},
        )
    if end_at - start_at > timedelta(hours=settings.BOOKING_MAX_HOURS):
        raise BookingError(
            "invalid_input",
            "too_long",
            gettext_noop("A booking may last at most %(hours)d hours."),
            gettext_noop("Split it into shorter bookings."),
            params={"hours": settings.BOOKING_MAX_HOURS},
        )


def check_attendees(attendees: int) -> None:
    if not isinstance(attendees, int) or isinstance(attendees, bool) or attendees < 1:
        raise BookingError(
            "invalid_input",
            "attendees_too_few",
            gettext_noop("At least one attendee is needed."),
            gettext_noop("Give the number of people, 1 or more."),
        )


MAX_TITLE = 120


def clean_title(title: str) -> str:
    """A meeting title as stored: typed text's rule (accounts.typed: NFC, no zero-width
    characters, a direction control refused), control characters out, spaces collapsed, at most
    MAX_TITLE characters (untrusted text: shown escaped, never interpreted)."""
    try:
        title = typed_text(title, TypedField.TITLE)
    except UncleanText as exc:
        raise BookingError(
            "invalid_input", exc.code, exc.msgid, exc.hint, params=exc.params
        ) from None
    text = " ".join("".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in title).split())
    if len(text) > MAX_TITLE:
        raise BookingError(
            "invalid_input",
            "title_too_long",
            gettext_noop("A meeting title may have at most %(max)d characters."),
            gettext_noop("Shorten the title."),
            params={"max": MAX_TITLE},
        )
    return text


def approval_reasons(
    *, room_code: str, requires_approval: bool, department: str, user_department: str
) -> list[tuple[str, dict[str, object]]]:
    """Why a booking of this room waits for an approver, as (msgid, params) pairs: the room
    facts the booking policy reads (bookings.tools.adapters.reserve_risk states the same rules
    for the runtime). Empty: it is booked at once."""
    reasons: list[tuple[str, dict[str, object]]] = []
    if requires_approval:
        reasons.append(
            (
                gettext_noop("%(room)s is a premium room: an approver must agree."),
                {"room": room_code},
            )
        )
    if user_department and department != user_department:
        reasons.append(
            (
                gettext_noop("%(room)s belongs to %(department)s: an approver must agree."),
                {"room": room_code, "department": department},
            )
        )
    return reasons
