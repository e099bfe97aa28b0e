"""A conversation read as one request: what job it asks for (book, availability, list, cancel,
move), with which constraints, and what is still to be asked. Pure functions: the rooms come in
as data, the earlier turns as their frames (what each turn had understood, JSON-able).

A follow-up answers the question of the turn before ("4" after "how many people?", "yes" after a
confirmation, "the second one" after a list, "不是明天, 是后天"): it is merged into that turn's
frame, and the merged frame is read again from scratch, so the delegation is always rebuilt
from everything the person said, and a later turn changes only what it names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from bookings.assistant.parsing.attendees import (
    INTENT,
    VAGUE,
    extract_attendees,
    extract_counting,
)
from bookings.assistant.parsing.dates import extract_date, extract_week, extract_weekend
from bookings.assistant.parsing.intent import (
    CHANGE_WORDS,
    CONDITION,
    CORRECTION,
    NO,
    YES,
    job_of,
    named_beneficiary,
    named_person,
    picked,
    wants_another_room,
)
from bookings.assistant.parsing.rooms import RoomName, find_rooms, fold, transposed_name
from bookings.assistant.parsing.text import (
    CJK,
    extract_equipment,
    normalize,
    unsupported_equipment,
)
from bookings.assistant.parsing.times import (
    END_BEFORE_START,
    NO_END,
    at_minutes,
    day_part,
    extract_time_span,
    later_end,
    period_of,
)
from bookings.assistant.parsing.words import unread_words


class Job(StrEnum):
    BOOK = "book"
    AVAILABILITY = "availability"
    LIST = "list"
    CANCEL = "cancel"
    MOVE = "move"
    UNCLEAR = "unclear"  # not a request the assistant can read as any job


@dataclass(frozen=True)
class Frame:
    """What the conversation has said so far. Every field is the person's own word, never a
    default: a later turn overrides only the fields it names."""

    job: str | None = None
    day: str | None = None  # ISO date
    week: tuple[str, str] | None = None  # [monday, next monday) for "this week"
    start: int | None = None  # minutes after midnight
    end: int | None = None
    time_problem: str | None = None
    # An end said alone ("an hour", "till 4"): it completes a start said before.
    duration: int | None = None
    until: int | None = None
    # "tomorrow afternoon", "明天上午" without a time: "am", "noon", "pm" or "evening", the part
    # of the day its availability is read in (a booking still asks for the time).
    period: str | None = None
    attendees: int | None = None
    upper_bound: bool = False  # attendees is the top of a range ("五六个人")
    vague_attendees: bool = False
    equipment: tuple[str, ...] = ()
    rooms: tuple[str, ...] = ()
    unknown_rooms: tuple[str, ...] = ()
    unknown_words: tuple[str, ...] = ()
    unsupported: tuple[str, ...] = ()
    for_someone: str | None = None
    bookings: tuple[str, ...] = ()  # booking codes named (B204)
    all_bookings: bool = False
    department: str | None = None  # "an eng room", "工程部会议室": a room of that department
    how_many: int | None = None  # bookings counted ("both", "两个…都"): exactly so many
    another_room: bool = False
    condition: bool = False
    guessed: tuple[str, ...] = ()  # fields read by a convention the person should confirm
    confirmed: bool = False
    options: tuple[str, ...] = ()  # what the reply offered (room or booking codes), in order
    open: bool = False  # the turn ended asking or offering: a follow-up answers it

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Frame | None:
        if not data:
            return None
        known = {f: data[f] for f in cls.__dataclass_fields__ if f in data}
        for name, value in list(known.items()):
            if isinstance(value, list):
                known[name] = tuple(value)
        try:
            return cls(**known)
        except TypeError:
            return None


@dataclass(frozen=True)
class Reading:
    job: Job
    language: str
    frame: Frame
    missing: tuple[str, ...] = ()  # what to ask for, in the order date, time, attendees
    confirm: bool = False  # a complete reading that rests on a guess: confirm before writing
    start_at: datetime | None = None
    end_at: datetime | None = None
    day_window: tuple[datetime, datetime] | None = None  # the day(s) asked about, whole
    yes: bool = False
    no: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def writes(self) -> int:
        """How many writes this reading allows (0: read or ask only)."""
        f = self.frame
        if self.job == Job.BOOK and self.ready:
            return max(1, len(f.rooms)) if len(f.rooms) > 1 else 1
        if self.job == Job.CANCEL and self.ready:
            if f.bookings:
                return len(f.bookings)
            return f.how_many or 1
        return 0

    @property
    def ready(self) -> bool:
        """Nothing to ask: the job can be done as read."""
        return not self.missing and not self.confirm and not self.blocked

    @property
    def blocked(self) -> str | None:
        """Why the job cannot be done as asked, whatever else is said."""
        f = self.frame
        if f.for_someone:
            return "for_someone_else"
        if f.unknown_rooms:
            return "unknown_room"
        if f.unknown_words:
            return "unknown_words"
        if f.unsupported:
            return "unsupported_equipment"
        if f.vague_attendees and f.attendees is None and self.job == Job.BOOK:
            return None  # asked as a missing field
        return None


# --- reading one turn -----------------------------------------------------------------------

_EOD = re.compile(
    r"\b(?:(?:at\s+)?the\s+)?end\s+of\s+(?:the\s+)?(?:work\s*)?day\b|\beod\b|\bcob\b|下班前"
)
_UNTIL_EOD = re.compile(
    r"\b(?:until|till|to|through)\s+(?:the\s+)?end\s+of\s+(?:the\s+)?day\b|\buntil\s+eod\b"
)
_BOOKING_CODE = re.compile(r"(?<![a-z0-9])b(?P<n>\d{1,9})(?![a-z0-9])")
_ALL = re.compile(r"\ball\b|\bevery\b|\bboth\b|全部|所有|都")
# "both of my bookings", "the two meetings", "两个预订都": exactly two bookings, cancelled only
# when exactly two match.
_TWO = re.compile(
    r"\bboth\b|\b(?:the|my|those|these)\s+(?:2|two)\s+(?:bookings|reservations|meetings|rooms)\b"
    r"|(?:2|两)\s*个?\s*(?:预订|预约|会议室|会议|会)[^，,。]{0,4}都"
)
# "one of our eng rooms", "an engineering room", "one of the engineering ones", "工程部会议室":
# the department whose rooms are meant (bookings.demo's departments).
_DEPARTMENT = re.compile(
    r"\b(?:1\s+of\s+(?:our|the)\s+)?(?P<en>eng|engineering|sales)(?:\s+team'?s)?\s+"
    r"(?:meeting\s+)?(?:rooms?|ones?)\b|(?P<zh>工程部|研发部|技术部|销售部)(?:的)?"
)
_DEPARTMENTS = {
    "eng": "Engineering",
    "engineering": "Engineering",
    "工程部": "Engineering",
    "研发部": "Engineering",
    "技术部": "Engineering",
    "sales": "Sales",
    "销售部": "Sales",
}


def _department(s: str) -> str | None:
    named = {_DEPARTMENTS[m["en"] or m["zh"]] for m in _DEPARTMENT.finditer(s)}
    return named.pop() if len(named) == 1 else None


_TAKE = re.compile(
    r"^\s*(?:ok(?:ay)?[,\s]+|then\s+|great[,\s]+)?(?:take|book|grab|reserve|get\s+me|i'?ll\s+take|"
    r"let'?s\s+(?:do|take|go\s+with)|go\s+with)\b"
    r"|^\s*(?:好的?[,，\s]*)?(?:那就?)?\s*(?:订|预订|要|就要|就订|用)"
)
_OFFERED = re.compile(r"\b([RB]\d{1,9})\b")


@dataclass(frozen=True)
class _Turn:
    frame: Frame
    yes: bool
    no: bool
    pick: int | None
    correction: bool
    has_intent: bool
    weekday: int | None = None  # a weekday named alone ("saturday", "周六"): in a week named before
    same: bool = False  # "the same time on Friday", "周五同一时间": the turn before's slot again


def _read_turn(
    text: str, *, today: date, rooms: Sequence[RoomName], job_hint: str | None = None
) -> _Turn:
    """The fields one turn names, nothing else. A pure function of its arguments (the day, not
    the time), and what it returns is immutable: a run's planner reads the same request at every
    step, so the reading of the first serves the others (in the worker, 11% of its CPU was this
    reading done again; bench/README.md, "issue 25")."""
    return _read_turn_once(text, today, tuple(rooms), job_hint)


@lru_cache(maxsize=512)
def _read_turn_once(
    text: str, today: date, rooms: tuple[RoomName, ...], job_hint: str | None
) -> _Turn:
    original = text
    normalized = normalize(text)
    correction = False
    match = CORRECTION.search(normalized)
    if match is not None:
        normalized = match["new"] or match["new2"] or normalized
        correction = True
    if CHANGE_WORDS.search(normalized):
        correction = True
    yes = YES.search(normalized) is not None
    no = NO.search(normalized) is not None and not yes
    pick = picked(normalized)
    job = job_of(normalized)

    room_names = frozenset(fold(r.name) for r in rooms)
    person = named_person(original, normalized, room_names)
    employee = named_beneficiary(normalized)
    department = _department(normalized)
    found = find_rooms(_DEPARTMENT.sub(" ", normalized), rooms)
    s = found.rest
    bookings = tuple(dict.fromkeys(f"B{int(m['n'])}" for m in _BOOKING_CODE.finditer(s)))
    s = _BOOKING_CODE.sub(" ", s)
    equipment = extract_equipment(s)
    unsupported = unsupported_equipment(s)
    week, s_week = extract_week(s, today)
    if week is None:
        week, s_week = extract_weekend(s, today)
    weekday = _bare_weekday(s)
    day, s = extract_date(s, today)
    if day is None and week is not None:
        s = s_week
    else:
        week = None
    guessed: list[str] = []
    if _UNTIL_EOD.search(s):
        s = _UNTIL_EOD.sub(" to 6pm ", s)
    elif _EOD.search(s):
        s = _EOD.sub(" 5pm-6pm ", s)
        guessed.append("time")
    counted, upper, s = extract_counting(s)
    part = day_part(normalized)
    span, s = extract_time_span(s, period_of(part))
    attendees, s = extract_attendees(s)
    if counted is not None:
        attendees = counted
    bare_number = re.fullmatch(
        r"\s*(?:make\s+it|it'?s|we'?re|we\s+are|for|just|改成|就|那就)?\s*(?P<n>\d{1,3})\s*"
        r"(?:个|位|人|people)?\s*(?:instead|吧)?\s*[.!。]?\s*",
        normalized,
    )
    if attendees is None and bare_number and job_hint == "attendees":
        attendees = int(bare_number["n"])
        s = ""
    vague = attendees is None and VAGUE.search(normalized) is not None
    if re.search(
        r"(?<![\d.])(\d+)\s*(?:-|to|or|到|至|或)\s*(\d+)\s*(?:people|人|个人|位)", normalized
    ):
        upper = True
    unknown_words = found.negated + unread_words(s, rooms, chinese=CJK.search(original) is not None)
    codes = found.codes
    if not codes and len(unknown_words) == 1:
        swapped = transposed_name(unknown_words[0], rooms)
        if swapped is not None:  # "Mapel": Maple, the one room it can be
            codes, unknown_words = (swapped.code,), ()
    unknown_words += _bending(normalized)
    if job in (Job.BOOK, None):
        unknown_words += tuple(m.group(0) for m in _EVERY_ROOM.finditer(normalized))[:1]
    frame = Frame(
        job=job,
        day=day.isoformat() if day else None,
        week=(week[0].isoformat(), week[1].isoformat()) if week else None,
        start=span.start,
        end=span.end,
        time_problem=span.problem,
        duration=span.duration,
        until=span.until,
        period=part if span.start is None else None,
        attendees=attendees,
        upper_bound=upper and attendees is not None,
        vague_attendees=vague,
        equipment=equipment,
        rooms=codes,
        unknown_rooms=found.unknown,
        unknown_words=unknown_words,
        unsupported=unsupported,
        for_someone=employee or person,
        bookings=bookings,
        all_bookings=_ALL.search(normalized) is not None,
        how_many=2 if job == Job.CANCEL and _TWO.search(normalized) else None,
        another_room=wants_another_room(normalized),
        condition=CONDITION.search(normalized) is not None,
        guessed=tuple(guessed),
        department=department,
    )
    has_intent = bool(INTENT.search(normalized)) or job is not None
    same = _SAME.search(normalized) is not None
    return _Turn(frame, yes, no, pick, correction, has_intent, weekday, same)


_EN_BARE_WEEKDAY = re.compile(
    r"(?<!next\s)(?<!this\s)(?<!last\s)(?<!coming\s)\b(?P<name>mon|tue|wed|thu|fri|sat|sun)"
    r"(?:day|s|sday|nesday|rsday|r|rs|urday)?\b"
)
_ZH_BARE_WEEKDAY = re.compile(r"(?<![下上这本个])(?:周|星期|礼拜)(?P<name>[一二三四五六日天1-7])")
_WEEKDAY_NUMBER = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}
_WEEKDAY_NUMBER |= {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
# The turn before's slot again, on another day: "same time on Friday", "same again tomorrow",
# "周五同一时间", "后天也订一个一样的".
_SAME = re.compile(
    r"\bsame\s+(?:time|slot|hours?|again|thing|room|setup|as\s+(?:before|that|today|tomorrow))\b"
    r"|\b(?:at|for)\s+the\s+same\s+(?:time|hours?)\b"
    r"|同[一1]?个?时间|同[一1]?个?时段|同样|(?<![怎这那])样的?时间|相同|照旧"
)


def _bare_weekday(s: str) -> int | None:
    """The weekday a turn names without a week ("saturday", "周六"), or None."""
    found = {
        _WEEKDAY_NUMBER[m["name"]] if m["name"] in _WEEKDAY_NUMBER else int(m["name"]) - 1
        for pattern in (_EN_BARE_WEEKDAY, _ZH_BARE_WEEKDAY)
        for m in pattern.finditer(s)
    }
    return found.pop() if len(found) == 1 else None


_BENDING = re.compile(
    r"每(?:周|天|个?星期|个?礼拜|个?月|个?工作日)|除了|或者|还是"
    r"|\b(?:every|each)\s+(?:other\s+)?(?:mon|tue|wed|thu|fri|sat|sun|day|week|morning|"
    r"afternoon|evening|month|weekday|workday|time)\w*"
)


# "book every room", "所有会议室都订下来": a booking of rooms nobody named, as many as there are.
# The assistant books the rooms a request names, or one that fits: it says so and books none.
_EVERY_ROOM = re.compile(
    r"\b(?:every|each|all(?:\s+the)?|all\s+of\s+the)\s+(?:meeting\s+)?rooms?\b"
    r"|(?:所有|全部|每个|每间)的?\s*(?:会议室|房间)"
)


def _bending(s: str) -> tuple[str, ...]:
    """Words that bend a slot the reader cannot bend, read on the whole text: a repeat (每周,
    "every Monday"), another room than one named (除了), alternatives (或者)."""
    return tuple(dict.fromkeys(m.group(0) for m in _BENDING.finditer(s)))[:1]


# --- the conversation -----------------------------------------------------------------------


def _merge(before: Frame, now: Frame, turn: _Turn) -> Frame:
    """``before`` with what ``now`` names: a field the later turn names replaces the earlier
    one; nothing else changes."""
    changes: dict[str, Any] = {}
    if before.week and turn.weekday is not None and now.week is None:
        # "next weekend" asked, "Saturday" answered: the Saturday of that weekend.
        first, last = (date.fromisoformat(d) for d in before.week)
        days = [first + timedelta(days=n) for n in range((last - first).days)]
        inside = [d for d in days if d.weekday() == turn.weekday]
        if inside:
            now = replace(now, day=inside[0].isoformat())
    for name in (
        "day",
        "week",
        "period",
        "attendees",
        "for_someone",
        "department",
    ):
        value = getattr(now, name)
        if value is not None:
            changes[name] = value
    if now.attendees is not None:
        changes["upper_bound"] = now.upper_bound
        changes["vague_attendees"] = False
    if now.start is None and before.start is not None and (now.duration or now.until):
        # "until when?" answered "an hour" or "till 4": the end of the start said before.
        end = (
            before.start + now.duration if now.duration else later_end(before.start, now.until or 0)
        )
        now = replace(now, start=before.start, end=end, time_problem=None)
    if now.start is not None:
        changes.update(start=now.start, end=now.end, time_problem=now.time_problem)
        changes["guessed"] = tuple(g for g in before.guessed if g != "time") + tuple(
            g for g in now.guessed if g == "time"
        )
    elif now.time_problem:
        changes["time_problem"] = now.time_problem
    for name in ("equipment", "unsupported", "bookings"):
        value = getattr(now, name)
        if value:
            changes[name] = tuple(dict.fromkeys(getattr(before, name) + value))
    if now.rooms or now.unknown_rooms:
        changes["rooms"], changes["unknown_rooms"] = now.rooms, now.unknown_rooms
    elif before.unknown_rooms and turn.pick is None and not turn.yes:
        changes["unknown_rooms"] = before.unknown_rooms  # still unanswered
    changes["unknown_words"] = now.unknown_words
    if now.all_bookings:
        changes["all_bookings"] = True
    if now.another_room:
        changes["another_room"] = True
    if now.condition:
        changes["condition"] = True
    if turn.pick is not None and before.options:
        index = turn.pick
        if -len(before.options) <= index < len(before.options):
            choice = before.options[index]
            if choice.startswith("B"):
                changes["bookings"] = (choice,)
            else:
                changes["rooms"], changes["unknown_rooms"] = (choice,), ()
                if before.job == Job.AVAILABILITY:
                    changes["job"] = Job.BOOK.value
    if turn.yes and before.options and before.job == Job.CANCEL:
        changes["bookings"] = before.options
    if turn.yes:
        changes["confirmed"] = True
        if before.job == Job.AVAILABILITY and len(before.options) == 1:
            changes["rooms"], changes["job"] = before.options, Job.BOOK.value
    if now.job == Job.MOVE:
        changes["job"] = before.job
    elif now.job is not None and now.job != before.job and now.job in (Job.BOOK, Job.CANCEL):
        changes["job"] = now.job
    changes["options"] = ()
    changes["open"] = False
    # A changed field is a new reading: what was confirmed was the old one.
    if any(k in changes for k in ("day", "start", "attendees", "rooms")) and not turn.yes:
        changes["confirmed"] = False
    return replace(before, **changes)


# Words that say nothing of the language a person writes in: yes/no, units, codes.
_ANY_LANGUAGE = frozenset(
    [
        "ok",
        "okay",
        "k",
        "kk",
        "yes",
        "yep",
        "yeah",
        "ya",
        "no",
        "nope",
        "nah",
        "sure",
        "pm",
        "am",
        "h",
        "hr",
        "hrs",
        "min",
        "mins",
        "ppl",
        "pax",
        "ok'd",
    ]
)


def language_of(
    text: str,
    conversation: Sequence[Mapping[str, Any]] = (),
    room_names: frozenset[str] = frozenset(),
) -> str:
    """ "zh" when the text has a Chinese character; "en" when it has an English word. An
    answer with neither ("4", "ok", "R7", "maple") keeps the conversation's language; a
    person who switches language mid-conversation is answered in the new one."""
    if CJK.search(text):
        return "zh"
    words = [
        w
        for w in re.findall(r"[a-z]{2,}", text.lower())
        if w not in _ANY_LANGUAGE and w not in room_names and not re.fullmatch(r"[rb]\d*", w)
    ]
    if conversation and not words:
        earlier = (conversation[-1].get("understood") or {}).get("language")
        if earlier in ("en", "zh"):
            return earlier
    return "en"


def read(
    text: str,
    *,
    now: datetime,
    tz: ZoneInfo,
    rooms: Sequence[RoomName] = (),
    conversation: Sequence[Mapping[str, Any]] = (),
) -> Reading:
    """Read ``text`` as the latest turn of ``conversation`` (the earlier turns, oldest first,
    each {"understood": ..., "reply": ...}). ``now`` anchors relative dates; a naive ``now`` is wall time in ``tz``."""
    local_now = now.astimezone(tz) if now.tzinfo is not None else now.replace(tzinfo=tz)
    today = local_now.date()
    language = language_of(text, conversation, frozenset(fold(r.name) for r in rooms))
    last = conversation[-1] if conversation else {}
    earlier = last.get("understood") or {}
    before = Frame.from_json(earlier.get("frame"))
    if before is not None:
        reply = str(last.get("reply") or "")
        kind = "B" if before.job == Job.CANCEL else "R"
        options = tuple(dict.fromkeys(c for c in _OFFERED.findall(reply) if c[0] == kind))
        asks = reply.rstrip().endswith(("?", "？"))
        offered = bool(options) and (asks or before.job == Job.AVAILABILITY)
        before = replace(
            before,
            options=options if offered else (),
            open=before.open or asks or offered,
        )
    asked = earlier.get("missing") or ()
    hint = "attendees" if "attendees" in asked else None
    turn = _read_turn(text, today=today, rooms=rooms, job_hint=hint)
    frame = turn.frame
    if before is not None and before.open and _follows_up(before, turn):
        frame = _merge(before, frame, turn)
        if (
            before.job == Job.AVAILABILITY
            and len(turn.frame.rooms) == 1
            and _TAKE.search(normalize(text))
        ):
            # "take Pine", "订Pine" after the free rooms were answered: that room, as asked.
            frame = replace(frame, job=Job.BOOK.value)
        return _finish(frame, language, local_now, tz, yes=turn.yes, no=turn.no)
    if (
        before is not None
        and turn.same
        and before.start is not None
        and before.end is not None
        and frame.job in (None, Job.BOOK, Job.AVAILABILITY)
    ):
        # "and the same time on Friday": the turn before's request, with what this one names.
        frame = _again(before, frame)
        return _finish(frame, language, local_now, tz, yes=turn.yes, no=turn.no)
    if (
        before is not None
        and _retries_refused(before, frame, str(last.get("reply") or ""))
        and not turn.same
    ):
        # "ok then Lighthouse", "那换成Pine吧", "ugh. 3 to 4 then" after a booking that was
        # refused: the same request with the room or the time this turn names.
        frame = _again(before, replace(frame, job=Job.BOOK.value))
        return _finish(frame, language, local_now, tz, yes=turn.yes, no=turn.no)
    if (
        before is not None
        and before.job == Job.LIST
        and frame.job is None
        and (frame.day is not None or frame.week is not None)
        and not (frame.rooms or frame.unknown_words or frame.attendees or frame.start)
    ):
        # "and Tuesday next week?", "那下周二呢?" after a list: the same question of that day.
        frame = _again(before, frame)
        return _finish(frame, language, local_now, tz, yes=turn.yes, no=turn.no)
    changes_a_booking = before is not None and not before.open and before.job == Job.BOOK
    if changes_a_booking and turn.correction and frame.job is None and not turn.has_intent:
        frame = replace(frame, job=Job.MOVE.value)  # changing a booking already made
    if frame.job is None:
        frame = replace(frame, job=_default_job(frame, turn))
    if (
        frame.job == Job.CANCEL
        and not frame.bookings
        and frame.day is None
        and frame.week is None
        and before is not None
        and (
            before.job == Job.BOOK
            or (before.job == Job.LIST and not frame.rooms and frame.start is None)
        )
    ):
        # "cancel it" right after a booking, or after a list of one: the booking the last
        # reply named (a list of several is asked about).
        made = tuple(dict.fromkeys(re.findall(r"\bB\d{1,9}\b", str(last.get("reply") or ""))))
        if len(made) == 1:
            frame = replace(frame, bookings=made)
    return _finish(frame, language, local_now, tz, yes=turn.yes, no=turn.no)


def _again(before: Frame, now: Frame) -> Frame:
    """The request of the turn before, on the day (and with any time, people or room) this
    turn names: a new request, nothing confirmed, nothing offered."""
    named = {
        name: getattr(now, name)
        for name in ("day", "week", "start", "end", "attendees", "period")
        if getattr(now, name) is not None
    }
    if now.start is not None:
        named["time_problem"] = now.time_problem
    if now.rooms or now.unknown_rooms:
        named["rooms"], named["unknown_rooms"] = now.rooms, now.unknown_rooms
    return replace(
        before,
        job=now.job or before.job,
        **named,
        equipment=tuple(dict.fromkeys(before.equipment + now.equipment)),
        unknown_words=now.unknown_words,
        unsupported=now.unsupported,
        for_someone=now.for_someone,
        bookings=(),
        confirmed=False,
        options=(),
        open=False,
    )


def _retries_refused(before: Frame, now: Frame, reply: str) -> bool:
    """Whether ``now`` names only another room or another time for the complete booking
    request of the turn before, which booked nothing (its reply names no booking)."""
    complete = before.day is not None and before.start is not None and before.end is not None
    return (
        before.job == Job.BOOK
        and not before.open
        and complete
        and _MADE_CODE.search(reply) is None
        and now.job in (None, Job.BOOK)
        and now.day is None
        and now.week is None
        and not now.bookings
        and not now.unknown_words
        and (len(now.rooms) == 1 or (now.start is not None and now.end is not None))
    )


_MADE_CODE = re.compile(r"\bB\d{1,9}\b")


def _follows_up(before: Frame, turn: _Turn) -> bool:
    """Whether the turn answers the open question rather than asking something new."""
    job = turn.frame.job
    if job == Job.MOVE and before.job == Job.BOOK:
        return True  # "改成6个人" changes the request still being asked about, not a booking
    if turn.yes or turn.no or turn.pick is not None or turn.correction:
        return job in (None, before.job) or job == Job.BOOK
    if job is not None and job != before.job:
        return before.job == Job.AVAILABILITY and job == Job.BOOK
    return True


def _default_job(frame: Frame, turn: _Turn) -> str:
    looks_like_booking = (
        turn.has_intent
        or bool(frame.rooms or frame.unknown_rooms or frame.equipment)
        or frame.attendees is not None
        or (frame.day is not None and frame.end is not None)
    )
    return Job.BOOK.value if looks_like_booking else Job.UNCLEAR.value


def _finish(
    frame: Frame, language: str, now: datetime, tz: ZoneInfo, *, yes: bool, no: bool
) -> Reading:
    job = Job(frame.job or Job.UNCLEAR)
    if job == Job.AVAILABILITY and frame.start is not None and frame.end is None:
        # "anything free at 3?": the hour from 3 is answered, never "until when?" (a read);
        # booking it from the answer is confirmed first (a guessed end).
        frame = replace(
            frame,
            end=frame.start + 60,
            time_problem=None,
            guessed=tuple(dict.fromkeys((*frame.guessed, "time"))),
        )
    day = date.fromisoformat(frame.day) if frame.day else None
    midnight = datetime(day.year, day.month, day.day, tzinfo=tz) if day else None
    start_at = end_at = None
    time_problem = frame.time_problem
    if midnight is not None and frame.start is not None and frame.end is not None:
        start_at, end_at = at_minutes(midnight, frame.start), at_minutes(midnight, frame.end)
        if end_at <= start_at:
            time_problem = END_BEFORE_START
    if frame.start is not None and frame.end is None:
        time_problem = NO_END
    elif midnight is None and frame.start is not None and frame.end is not None:
        time_problem = END_BEFORE_START if frame.end <= frame.start else time_problem
    day_window = None
    if midnight is not None:
        day_window = (midnight, midnight + timedelta(days=1))
    elif frame.week:
        monday = date.fromisoformat(frame.week[0])
        start = datetime(monday.year, monday.month, monday.day, tzinfo=tz)
        day_window = (start, start + timedelta(days=7))
    extras: dict[str, Any] = {}
    if time_problem:
        extras["problem"] = time_problem
    missing: tuple[str, ...] = ()
    confirm = False
    if job == Job.BOOK:
        missing = tuple(
            name
            for name, absent in (
                ("date", day is None),
                ("time", frame.start is None or frame.end is None or time_problem is not None),
                ("attendees", frame.attendees is None and len(frame.rooms) < 2),
            )
            if absent
        )
        confirm = bool(frame.guessed) and not frame.confirmed
    elif job == Job.AVAILABILITY:
        missing = ("date",) if day is None else ()
        if frame.start is not None and (start_at is None or time_problem):
            missing += ("time",)
    elif job == Job.CANCEL:
        if not frame.bookings and day_window is None:
            missing = ("which",)
        elif not frame.bookings and frame.start is not None and frame.end is None:
            pass  # "my 3pm": a start names the booking
    reading = Reading(
        job=job,
        language=language,
        frame=frame,
        missing=missing,
        confirm=confirm,
        start_at=start_at,
        end_at=end_at,
        day_window=day_window,
        yes=yes,
        no=no,
        extras=extras,
    )
    if no and frame.open is False and job == Job.BOOK and frame.confirmed is False and not missing:
        # "no" to a confirmation: nothing is booked, the person says what to change.
        return replace(reading, confirm=True, extras=extras | {"declined": True})
    return reading


def understood(reading: Reading) -> dict[str, Any]:
    """The JSON-able record of a turn, kept with the conversation: the frame (open when the
    turn asks something), what was missing and the language. What the reply offered is read
    back from the reply itself (the codes the person saw)."""
    frame = replace(reading.frame, open=not reading.ready, options=())
    return {
        "job": reading.job.value,
        "language": reading.language,
        "frame": frame.to_json(),
        "missing": list(reading.missing),
    }
