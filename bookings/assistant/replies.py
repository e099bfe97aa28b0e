"""Everything the booking assistant says to a person, through gettext (English msgids; the
Simplified Chinese catalogue is in locale/). Runs store "en" or "zh"; Django calls Chinese
"zh-hans"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.utils import dateformat, timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from agentops.contract import ReplyKind
from bookings.assistant.parsing import (
    CANCEL_OR_CHANGE,
    END_BEFORE_START,
    FOR_SOMEONE_ELSE,
    NO_END,
    Clarification,
)
from bookings.errors import BookingError
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


def sentences(*parts: str) -> str:
    """Sentences one after another, the way the active language writes them (English puts a
    space between them, Chinese does not)."""
    joined = ""
    for part in filter(None, parts):
        if joined:
            part = pgettext("two sentences", "%(first)s %(second)s") % {
                "first": joined,
                "second": part,
            }
        joined = part
    return joined


def clarifying_question(clarification: Clarification, *, asker: str = "") -> str:
    """What to ask (or say) when a request is not a booking the assistant can make as asked;
    ``asker`` is the employee id of the person asking."""
    with in_language(clarification.language):
        if clarification.problem == CANCEL_OR_CHANGE:
            return _(
                "I can book a meeting room for you, one room per request. I cannot cancel or "
                "change bookings: cancel yours on the %(page)s page."
            ) % {"page": _("My bookings")}
        if clarification.problem == FOR_SOMEONE_ELSE:
            if asker and clarification.named == asker:
                return _(
                    "I always book for the person asking (you, %(asker)s): ask again without "
                    "naming anyone."
                ) % {"asker": asker}
            return _(
                "I book rooms only for the person asking, so I booked nothing for %(named)s. "
                "If the room is for you, ask again without naming %(named)s; %(named)s can ask "
                "for their own."
            ) % {"named": clarification.named}
        parts = {
            "date": _("which day"),
            "time": _("what time (start and end)"),
            "attendees": _("for how many people"),
        }
        prefix = ""
        if clarification.problem == END_BEFORE_START:
            prefix = _("The end time must be after the start time.")
        elif clarification.problem == NO_END:
            parts["time"] = _("until what time (or for how long)")
        asked = _join([str(parts[name]) for name in clarification.missing])
        return sentences(prefix, _("Could you tell me %(what)s?") % {"what": asked})


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


def _offer(*, people: int, rooms: list[str]) -> str:
    if not rooms:
        return _("No other room fits %(people)s people at that time either.") % {"people": people}
    return _("Free rooms for %(people)s people at that time: %(rooms)s. Ask again naming one.") % {
        "people": people,
        "rooms": _join(rooms),
    }


def named_room_unavailable(
    language: str,
    *,
    named: dict,
    people: int,
    equipment: Iterable[str],
    taken_meanwhile: bool,
    offer: list[str],
) -> str:
    """Why the room the person named cannot be booked, from the search's ``named_room``, and
    the free rooms that fit instead (``offer``: room codes, best first)."""
    with in_language(language):
        room = named["room_id"]
        missing = [e for e in equipment if e not in named.get("equipment", [])]
        if not named.get("exists"):
            why = _("There is no room %(room)s.") % {"room": room}
        elif not named.get("bookable"):
            why = _("%(room)s cannot be booked: it is not open for booking.") % {"room": room}
        elif (named.get("capacity") or 0) < people:
            why = _("%(room)s seats only %(capacity)s people.") % {
                "room": room,
                "capacity": named["capacity"],
            }
        elif missing:
            why = _("%(room)s has no %(equipment)s.") % {
                "room": room,
                "equipment": equipment_text(missing),
            }
        elif taken_meanwhile:
            why = _("%(room)s was taken while I was booking it.") % {"room": room}
        else:
            why = _("%(room)s is already booked at that time.") % {"room": room}
        return sentences(why, _offer(people=people, rooms=offer))


def too_many_people(language: str, *, people: int, largest: int) -> str:
    with in_language(language):
        return _("No room seats %(people)s people: the largest room seats %(largest)s.") % {
            "people": people,
            "largest": largest,
        }


def already_holding(language: str, bookings: list[dict]) -> str:
    """The person already holds a room at this time (the search's ``own_bookings``)."""
    with in_language(language):
        held = [
            _("%(room)s (booking %(code)s, %(start)s–%(end)s)")
            % {
                "room": b["room_id"],
                "code": b["booking_id"],
                "start": f"{_local(b['start_at']):%H:%M}",
                "end": f"{_local(b['end_at']):%H:%M}",
            }
            for b in bookings
        ]
        return sentences(
            _("You already have %(bookings)s at this time.") % {"bookings": _join(held)},
            _(
                "I booked nothing, so that you do not hold two rooms at once. If you need "
                'another room as well, ask again and say "another room".'
            ),
        )


def in_the_past(language: str, *, start_at: datetime, end_at: datetime) -> str:
    start, end = timezone.localtime(start_at), timezone.localtime(end_at)
    with in_language(language):
        return _("%(day)s, %(start)s–%(end)s is in the past. Tell me a time from now on.") % {
            "day": dateformat.format(start, _("D j M Y")),
            "start": f"{start:%H:%M}",
            "end": f"{end:%H:%M}",
        }


def too_many_requests(language: str, *, retry_after_ms: int | None) -> str:
    seconds = max(1, -(-(retry_after_ms or 1000) // 1000))
    return reply(ReplyKind.RATE_LIMITED, language=language, detail=str(seconds))


def refusal_text(envelope: dict) -> str:
    """A tool's refusal in the active language: the booking service's messages carry their
    msgid; other refusals (the runtime's gate) are shown as they came."""
    return BookingError.from_envelope(envelope).display_message


def search_unverified(language: str) -> str:
    with in_language(language):
        return _(
            "I could not verify availability (the room search did not answer), so I booked nothing."
        )


def search_refused(language: str, envelope: dict) -> str:
    with in_language(language):
        return _("The room search was refused: %(message)s") % {"message": refusal_text(envelope)}


def rooms_not_free(language: str, *, rooms: list[str]) -> str:
    with in_language(language):
        return _("%(rooms)s is not free for that time, so I booked none of the rooms.") % {
            "rooms": _join(rooms)
        }


def booking_refused(language: str, envelope: dict) -> str:
    with in_language(language):
        return _("The booking was refused: %(message)s") % {"message": refusal_text(envelope)}


# Why a run stopped early (the runtime's outcome values), worded when the reply is built.
_STOP_REASONS = {
    "budget_exhausted": lambda: _("it used up its budget"),
    "loop_detected": lambda: _("it kept repeating the same call"),
    "model_unavailable": lambda: _("the assistant's model did not answer"),
    "rate_limited": lambda: _("too many requests this minute"),
}


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


# What was not done, by the write the request allowed: a failed move or cancel booked nothing,
# but that is not what the person asked about.
_NOT_DONE = {
    "change_booking": lambda: _("Nothing was changed; the booking is as it was."),
    "cancel_booking": lambda: _("The booking was not cancelled."),
    "cancel_series": lambda: _("The series was not cancelled."),
}


def _not_done(writes: frozenset[str]) -> str:
    openings = {
        _NOT_DONE[tool]() if tool in _NOT_DONE else _("Nothing was booked.") for tool in writes
    }
    return openings.pop() if len(openings) == 1 else _("Nothing was booked.")


def reply(
    kind: ReplyKind, *, language: str, detail: str = "", writes: frozenset[str] = frozenset()
) -> str:
    with in_language(language):
        if kind == ReplyKind.NOTHING_DONE:
            if is_question(detail):  # a question asks; it does not open with what was not done
                return detail.strip()
            return sentences(_not_done(writes), detail.strip())
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
        if kind == ReplyKind.RATE_LIMITED:
            return _(
                "You sent too many requests this minute. Try again in %(seconds)s seconds."
            ) % {"seconds": detail}
        if kind == ReplyKind.STOPPED:
            why = _STOP_REASONS.get(detail)
            return _("The request was stopped (%(why)s).") % {
                "why": why() if why else detail.replace("_", " ")
            }
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


# --- the conversation's questions and answers ---------------------------------------------------


def is_question(text: str) -> bool:
    return text.strip().endswith(("?", "？"))


def room_label(code: str, name: str | None = None) -> str:
    """A room in the person's words: its name and code ("Maple (R3)")."""
    if not name or name.lower() == code.lower() or name == f"Room {code}":
        return code
    return _("%(name)s (%(code)s)") % {"name": name, "code": code}


def _labels(codes: Iterable[str], names: Mapping[str, str]) -> list[str]:
    return [room_label(code, names.get(code)) for code in codes]


def _day(value: datetime) -> str:
    return dateformat.format(timezone.localtime(value), _("D j M Y"))


def _span(start: datetime, end: datetime) -> str:
    start, end = timezone.localtime(start), timezone.localtime(end)
    return f"{start:%H:%M}–{end:%H:%M}"


def for_someone_else(language: str, *, named: str, asker: str = "") -> str:
    with in_language(language):
        if asker and named.upper() == asker.upper():
            return _(
                "I always book for the person asking (you, %(asker)s). Shall I book it for you? "
                "Ask again without naming anyone?"
            ) % {"asker": asker}
        return _(
            "I book rooms only for the person asking, so I booked nothing for %(named)s. If "
            "the room is for you, could you ask again without naming %(named)s?"
        ) % {"named": named}


def no_such_room(language: str, *, name: str, nearest: list[str]) -> str:
    with in_language(language):
        if nearest:
            return _(
                "There is no room called %(name)s, so I booked nothing. Did you mean %(rooms)s?"
            ) % {"name": name.title() if name.isascii() else name, "rooms": _join(nearest)}
        return _(
            "There is no room called %(name)s, so I booked nothing. Which room did you mean?"
        ) % {"name": name.title() if name.isascii() else name}


def word_not_understood(language: str, *, word: str, room: str | None) -> str:
    with in_language(language):
        if room:
            return _('I did not understand "%(word)s". Did you mean the room %(room)s?') % {
                "word": word,
                "room": room,
            }
        return _(
            'I did not understand "%(word)s", so I booked nothing. Is it a room or something '
            "the room needs? Could you say it another way?"
        ) % {"word": word}


def bend_not_understood(language: str, *, words: str) -> str:
    """Words that bend a slot the reader does not bend ("except Maple", "every Monday",
    "或者")."""
    with in_language(language):
        return _(
            'I did not understand "%(words)s", so I booked nothing: I book one meeting at a '
            "time, on the day, at the time and in the room you name. Could you say it that way?"
        ) % {"words": words}


def equipment_unknown(language: str, items: Iterable[str]) -> str:
    with in_language(language):
        return _(
            "Rooms here list only this equipment: %(known)s. I cannot check for %(items)s, so "
            "I booked nothing. Shall I book without it?"
        ) % {
            "known": equipment_text(("projector", "whiteboard", "video", "phone", "display")),
            "items": pgettext("list separator", ", ").join(items),
        }


def missing_question(
    language: str, missing: Iterable[str], *, problem: str | None = None, vague: bool = False
) -> str:
    missing = tuple(missing)
    with in_language(language):
        if missing == ("which",):
            return _(
                "Which booking should I cancel? Tell me its code (e.g. B204) or its day and time?"
            )
        question = clarifying_question(
            Clarification(tuple(m for m in missing if m != "which"), language, problem)
        )
        if vague and "attendees" in missing:
            return sentences(
                _("I need the exact number of people to pick a room that fits."), question
            )
        return question


def declined(language: str) -> str:
    with in_language(language):
        return _("All right, I booked nothing. What should I change?")


def confirm_booking(language: str, reading, names: Mapping[str, str]) -> str:
    """State a reading that rests on a guess in the person's terms, and ask before writing."""
    frame = reading.frame
    with in_language(language):
        what = _("a room") if not frame.rooms else _join(_labels(frame.rooms, names))
        text = _(
            "I read this as %(room)s on %(day)s, %(span)s, for %(people)s people. Shall I book it?"
        ) % {
            "room": what,
            "day": _day(reading.start_at),
            "span": _span(reading.start_at, reading.end_at),
            "people": frame.attendees,
        }
        if "time" in frame.guessed:
            text = sentences(_('I took "the end of the day" as 17:00–18:00.'), text)
        return text


def move_unavailable(language: str) -> str:
    with in_language(language):
        return _(
            "Moving or changing a booking is not available in the assistant yet, so I changed "
            'nothing. You can cancel the booking here (e.g. "cancel B204") and book the new '
            "time, or change it on the %(page)s page."
        ) % {"page": _("My bookings")}


def what_can_i_do(language: str) -> str:
    with in_language(language):
        return _(
            "I can book a room, say which rooms are free, list your bookings or cancel one. "
            "What would you like?"
        )


def day_over(language: str) -> str:
    with in_language(language):
        return _("That day's working hours are over: no room can be booked for it any more.")


def _merged(spans: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(spans):
        if merged and merged[-1][1] >= start:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def availability(
    language: str,
    *,
    free: Mapping[str, list[tuple[datetime, datetime]]],
    names: Mapping[str, str],
    asked_rooms: list[str],
    day: datetime,
    whole_slot: bool,
    people: int | None,
    searched: tuple[datetime, datetime],
    more: bool = False,
    unchecked: Sequence[str] = (),
) -> str:
    """The answer to an availability question: nothing is booked. ``searched``: from the first
    hour searched to the end of the last (a day, or the part of it the person named). ``more``:
    more rooms are free than ``free`` lists (each listed room's times are all of them);
    ``unchecked``: named rooms not asked about (the run's reads ran out)."""
    with in_language(language):
        answer = _availability(
            free=free,
            names=names,
            asked_rooms=asked_rooms,
            day=day,
            whole_slot=whole_slot,
            people=people,
            searched=searched,
        )
        return sentences(
            answer,
            _(
                "More rooms are free than I listed: name a room, or say how many people and "
                "what equipment, to narrow it."
            )
            if more
            else "",
            _("I did not check %(rooms)s: ask about it on its own.")
            % {"rooms": _join(_labels(unchecked, names))}
            if unchecked
            else "",
        )


def _availability(
    *,
    free: Mapping[str, list[tuple[datetime, datetime]]],
    names: Mapping[str, str],
    asked_rooms: list[str],
    day: datetime,
    whole_slot: bool,
    people: int | None,
    searched: tuple[datetime, datetime],
) -> str:
    when = _day(day)
    if whole_slot:
        if asked_rooms:
            room = _join(_labels(asked_rooms, names))
            if all(code in free for code in asked_rooms):
                return _(
                    '%(room)s is free then (%(day)s). I booked nothing: say "book it" if you want it.'
                ) % {"room": room, "day": when}
            return _("%(room)s is not free then (%(day)s). I booked nothing.") % {
                "room": room,
                "day": when,
            }
        if not free:
            return _("No room is free then (%(day)s). I booked nothing.") % {"day": when}
        rooms = _join(_labels(list(free), names))
        if people:
            return _(
                "Free then for %(people)s people (%(day)s): %(rooms)s. I booked nothing: say which one to book."
            ) % {"people": people, "day": when, "rooms": rooms}
        return _("Free then (%(day)s): %(rooms)s. I booked nothing: say which one to book.") % {
            "day": when,
            "rooms": rooms,
        }
    if not free:
        return _("No room is free on %(day)s, %(span)s. I booked nothing.") % {
            "day": when,
            "span": _span(*searched),
        }
    lines = [
        _("%(room)s: %(times)s")
        % {
            "room": room_label(code, names.get(code)),
            "times": pgettext("list separator", ", ").join(
                _span(s, e) for s, e in _merged(free[code])
            ),
        }
        for code in free
    ]
    return sentences(
        _("Free times on %(day)s:") % {"day": when},
        pgettext("list separator", ", ").join(lines) if len(lines) == 1 else "; ".join(lines),
        _("I booked nothing: tell me the time and room to book."),
    )


def _booking_line(b: Mapping[str, Any], names: Mapping[str, str]) -> str:
    start = datetime.fromisoformat(b["start_at"])
    end = datetime.fromisoformat(b["end_at"])
    people = int(b.get("attendees") or 0)
    return ngettext(
        "%(code)s: %(room)s, %(day)s %(span)s, %(people)s person",
        "%(code)s: %(room)s, %(day)s %(span)s, %(people)s people",
        people,
    ) % {
        "code": b["booking_id"],
        "room": room_label(b["room_id"], names.get(b["room_id"])),
        "day": _day(start),
        "span": _span(start, end),
        "people": people,
    }


PARTIAL_LISTED = 10  # bookings listed from a set not read whole (the soonest of those read)


def _partial(read: int) -> str:
    """That only part of the person's bookings was read (``read`` of them), and how to get the
    rest. Within in_language."""
    return _(
        "You have more bookings than I can read for one answer (I read %(count)s). Ask about "
        "one day, e.g. “what have I booked tomorrow?”, or see them all on the %(page)s page."
    ) % {"count": read, "page": _("My bookings")}


def my_bookings(
    language: str,
    bookings: Sequence[Mapping[str, Any]],
    *,
    names: Mapping[str, str],
    when: tuple[datetime, datetime] | None,
    read: int | None = None,
) -> str:
    """The person's bookings the question names. ``read``: only that many of their bookings
    were read (not all): the answer says so and never claims the ones listed are all."""
    with in_language(language):
        if read is not None:
            soonest = "; ".join(_booking_line(b, names) for b in bookings[:PARTIAL_LISTED])
            among = (
                _("The soonest of those I read: %(lines)s.") % {"lines": soonest}
                if bookings
                else ""
            )
            return sentences(_partial(read), among)
        lines = "; ".join(_booking_line(b, names) for b in bookings)
        if not bookings:
            if when is None:
                return _("You have no upcoming bookings.")
            return _("You have no bookings then.")
        return _("Your bookings: %(lines)s.") % {"lines": lines}


def nothing_to_cancel(
    language: str, *, when: tuple[datetime, datetime] | None, read: int | None = None
) -> str:
    with in_language(language):
        if read is not None:
            return sentences(
                _partial(read),
                _(
                    "I found none that matches among them, so I cancelled nothing. Which "
                    "booking do you mean (e.g. B204)?"
                ),
            )
        if when is None:
            return _(
                "You have no upcoming bookings, so I cancelled nothing. Did you mean another one?"
            )
        return _("You have no booking then, so I cancelled nothing. Did you mean another time?")


def confirm_cancel(
    language: str,
    codes: list[str],
    bookings: Sequence[Mapping[str, Any]],
    names: Mapping[str, str],
    *,
    read: int | None = None,
) -> str:
    with in_language(language):
        lines = "; ".join(_booking_line(b, names) for b in bookings) or _join(codes)
        if len(codes) == 1:
            question = _("Cancel %(lines)s? Say yes to cancel it?") % {"lines": lines}
        else:
            question = _(
                "Which of these should I cancel: %(lines)s? Say yes to cancel all of them, or name one?"
            ) % {"lines": lines}
        return sentences(_partial(read), question) if read is not None else question


def cancel_refused(language: str, envelope: dict) -> str:
    with in_language(language):
        return _("I cancelled nothing: %(message)s Which booking did you mean?") % {
            "message": refusal_text(envelope)
        }


# --- moving a booking -------------------------------------------------------------------------


def _where(room: str, start: datetime, end: datetime, names: Mapping[str, str]) -> str:
    return _("%(room)s, %(day)s %(span)s") % {
        "room": room_label(room, names.get(room)),
        "day": _day(start),
        "span": _span(start, end),
    }


def move_question(
    language: str,
    problem: str,
    candidates: list[Mapping[str, Any]],
    names: Mapping[str, str],
    *,
    read: int | None = None,
) -> str:
    """Why the move cannot be done as read, ending with a question. ``read``: only that many of
    the person's bookings were read (not all), said first."""
    if read is not None:
        with in_language(language):
            return sentences(_partial(read), move_question(language, problem, candidates, names))
    with in_language(language):
        lines = "; ".join(_booking_line(b, names) for b in candidates)
        if problem == "several":
            return _(
                "You have several bookings that match: %(lines)s. Which one should I move, and "
                "to when?"
            ) % {"lines": lines}
        if problem == "no_booking":
            return _(
                "I found no upcoming booking of yours that matches, so I changed nothing. Which "
                "booking do you mean (e.g. B204)?"
            )
        if problem == "same":
            return _("That is when and where the booking already is. To when should I move it?")
        if problem == "past":
            return _(
                "That time has already passed, so I changed nothing. To when should I move it?"
            )
        if problem == "bad_time":
            return _("The new end would be before the new start. To when should I move it?")
        if problem == "bad_count":
            return _("That would leave nobody at the meeting. How many people will there be?")
        if lines:
            return _("Which booking should I move, and to when? Yours: %(lines)s?") % {
                "lines": lines
            }
        return _("Which booking should I move (e.g. B204), and to when?")


def confirm_move(
    language: str,
    booking: Mapping[str, Any],
    *,
    room: str,
    start_at: datetime,
    end_at: datetime,
    names: Mapping[str, str],
) -> str:
    with in_language(language):
        old = _where(
            booking["room_id"],
            datetime.fromisoformat(str(booking["start_at"])),
            datetime.fromisoformat(str(booking["end_at"])),
            names,
        )
        return _("Move %(code)s (%(old)s) to %(new)s? Say yes to move it?") % {
            "code": booking["booking_id"],
            "old": old,
            "new": _where(room, start_at, end_at, names),
        }


def move_not_free(
    language: str, *, room: str, start_at: datetime, end_at: datetime, names: Mapping[str, str]
) -> str:
    with in_language(language):
        return _("%(where)s is not free, so the booking stays as it is.") % {
            "where": _where(room, start_at, end_at, names)
        }


def moved(receipt: dict, language: str) -> str:
    start, end = _local(receipt["start_at"]), _local(receipt["end_at"])
    stayed = receipt.get("from_room_id") == receipt["room_id"] and all(
        receipt.get(f"from_{edge}") and _local(receipt[f"from_{edge}"]) == _local(receipt[edge])
        for edge in ("start_at", "end_at")
    )
    with in_language(language):
        params = {
            "code": receipt["booking_id"],
            "room": receipt["room_id"],
            "day": dateformat.format(start, _("D j M Y")),
            "start": f"{start:%H:%M}",
            "end": f"{end:%H:%M}",
            "people": receipt.get("attendees"),
        }
        if stayed and receipt.get("attendees"):
            return (
                _("Booking %(code)s is now for %(people)s: %(room)s on %(day)s, %(start)s–%(end)s.")
                % params
            )
        return _("Moved booking %(code)s to %(room)s on %(day)s, %(start)s–%(end)s.") % params
