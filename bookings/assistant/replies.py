"""Everything the booking assistant says to a person, through gettext (English msgids; the
Simplified Chinese catalogue is in locale/). Runs store "en" or "zh"; Django calls Chinese
"zh-hans"."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.utils import dateformat, timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from agentops.contract import ReplyKind
from bookings.assistant.parsing import END_BEFORE_START, NO_END, Clarification
from bookings.rules import equipment_label

DJANGO_LANGUAGE = {"zh": "zh-hans", "en": "en"}


def in_language(language: str):
    """A context manager: gettext answers in the run's language."""
    return translation.override(DJANGO_LANGUAGE.get(language, "en"))


def _join(words: list[str]) -> str:
    if len(words) == 1:
        return words[0]
    return _("%(items)s and %(last)s") % {
        "items": pgettext("list separator", ", ").join(words[:-1]),
        "last": words[-1],
    }


def clarifying_question(clarification: Clarification) -> str:
    with in_language(clarification.language):
        parts = {
            "date": _("which day"),
            "time": _("what time (start and end)"),
            "attendees": _("for how many people"),
        }
        prefix = ""
        if clarification.problem == END_BEFORE_START:
            prefix = _("The end time must be after the start time.") + " "
        elif clarification.problem == NO_END:
            parts["time"] = _("until what time (or for how long)")
        asked = _join([str(parts[name]) for name in clarification.missing])
        return prefix + _("Please tell me %(what)s.") % {"what": asked}


def equipment_text(equipment: Iterable[str]) -> str:
    return pgettext("list separator", ", ").join(str(equipment_label(e)) for e in equipment)


def no_room(language: str, *, people: int, equipment: Iterable[str]) -> str:
    with in_language(language):
        wanted = equipment_text(equipment)
        if wanted:
            return _(
                "No room fits %(people)s people with %(equipment)s for that time. Try another time?"
            ) % {"people": people, "equipment": wanted}
        return _("No room fits %(people)s people for that time. Try another time?") % {
            "people": people
        }


def search_unverified(language: str) -> str:
    with in_language(language):
        return _(
            "I could not verify availability (the room search did not answer), so I booked nothing."
        )


def search_refused(language: str, message: str) -> str:
    with in_language(language):
        return _("The room search was refused: %(message)s") % {"message": message}


def rooms_not_free(language: str, *, rooms: list[str]) -> str:
    with in_language(language):
        return _("%(rooms)s is not free for that time, so I booked none of the rooms.") % {
            "rooms": _join(rooms)
        }


def booking_refused(language: str, message: str) -> str:
    with in_language(language):
        return _("The booking was refused: %(message)s") % {"message": message}


# A multi-room request is all or nothing: when it ends without all its rooms, or is cancelled,
# the bookings it made are released (the runtime's saga); these say what became of each one.
_ROLLBACK = {
    ReplyKind.RELEASED: lambda: _("%(code)s had already been booked and was released."),
    ReplyKind.STILL_HELD: lambda: _(
        "%(code)s had already been booked and is still booked: releasing it failed, "
        "and an operator will release it."
    ),
    ReplyKind.NONE_HELD: lambda: _("nothing was booked."),
}


def reply(kind: ReplyKind, *, language: str, detail: str = "") -> str:
    with in_language(language):
        if kind == ReplyKind.NOTHING_DONE:
            return f"{_('Nothing was booked.')} {detail}".strip()
        if kind == ReplyKind.CANCELLED:
            if detail:  # what became of the run's bookings, from the verified state
                return _("Cancelled; %(outcome)s") % {"outcome": detail}
            return pgettext("run", "Cancelled.")
        if kind in _ROLLBACK:
            return _ROLLBACK[kind]() % {"code": detail}
        if kind == ReplyKind.APPROVAL_EXPIRED:
            return _("%(what)s needed approval and nobody decided in time; nothing was booked.") % {
                "what": detail
            }
        if kind == ReplyKind.STILL_CHECKING:
            return _(
                "Still checking whether the booking went through; nothing has been booked twice. "
                "This page will update."
            )
        if kind == ReplyKind.STOPPED:
            return _("The request was stopped (%(why)s).") % {"why": detail.replace("_", " ")}
        raise ValueError(kind)


def _local(value: str) -> datetime:
    return timezone.localtime(datetime.fromisoformat(value))


def booked(receipt: dict, language: str) -> str:
    start, end = _local(receipt["start_at"]), _local(receipt["end_at"])
    with in_language(language):
        # Translators: a PHP-style date format (Django's date filter), e.g. "Mon 28 Sep 2026".
        day = dateformat.format(start, _("D j M Y"))
        return _(
            "Booked %(room)s on %(day)s, %(start)s–%(end)s, for %(people)s. Booking %(code)s."
        ) % {
            "room": receipt["room_id"],
            "day": day,
            "start": f"{start:%H:%M}",
            "end": f"{end:%H:%M}",
            "people": receipt["attendees"],
            "code": receipt["booking_id"],
        }


def cancelled(receipt: dict, language: str) -> str:
    with in_language(language):
        return _("Cancelled booking %(code)s.") % {"code": receipt["booking_id"]}
