"""A request to move one of the person's bookings, read into which booking (a code, "my 2pm
tomorrow", "tomorrow's Maple") and where it goes (a new start or span, a new day, a new room, or
a shift: "back an hour", "推迟一小时"), and resolved against the person's bookings. Pure
functions: the bookings come in as the tools' dicts (booking_id, room_id, start_at, end_at,
attendees, status), so the host (building the delegation) and the planner (through
list_my_bookings / get_booking) resolve a request the same way."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Any

from bookings.assistant.parsing.dates import extract_date
from bookings.assistant.parsing.rooms import RoomName, find_rooms
from bookings.assistant.parsing.text import normalize
from bookings.assistant.parsing.times import extract_time_span, text_period

_CODE = re.compile(r"(?<![a-z0-9])b(?P<n>\d{1,9})(?![a-z0-9])")
_AMOUNT_NAMED = (
    r"(?P<n>an?|one|half\s+an|\d+(?:\.\d+)?|半)\s*(?:个\s*)?"
    r"(?P<u>hours?|hrs?|h\b|minutes?|mins?|小时|钟头|分钟|刻钟|刻)"
)
_AMOUNT_ONE = re.compile(_AMOUNT_NAMED)
_AMOUNT = _AMOUNT_NAMED.replace("?P<n>", "?:").replace("?P<u>", "?:")
_LATER = re.compile(
    rf"\b(?:back|later|out)\s+(?:by\s+)?{_AMOUNT}|\b(?:push|delay|postpone|move|shift)\w*\s+"
    rf"(?:it\s+|(?:my|the)\s+\S+\s+)?by\s+{_AMOUNT}|{_AMOUNT}\s+later\b"
    rf"|(?:推迟|延后|往后推|往后挪|往后|晚)\s*{_AMOUNT}"
)
_EARLIER = re.compile(
    rf"\b(?:forward|earlier|up)\s+(?:by\s+)?{_AMOUNT}|{_AMOUNT}\s+earlier\b"
    rf"|(?:提前|往前挪|往前|早)\s*{_AMOUNT}"
)
_DAYS_LATER = re.compile(
    r"\bthe\s+(?:next\s+)?day\s+after\s+(?:that|it)\b|\b(?:a|1)\s+day\s+later\b"
    r"|\b(?:back|out)\s+(?:by\s+)?(?:a|1)\s+day\b"
    r"|(?:往后|向后)?(?:顺延|推迟|延后|往后推|往后挪)\s*(?P<n>\d)\s*天"
)
_DAYS_EARLIER = re.compile(r"\bthe\s+day\s+before\s+(?:that|it)\b|(?:提前|往前挪)\s*(?P<n>\d)\s*天")
# A head count changed, as a number of people (absolute) or a number more or fewer (delta).
_PEOPLE_UNIT = r"(?:\s*(?:people|ppl|persons?|pax|attendees?|guests?|of\s+us|个人|个|位|名|人))"
_HEADCOUNT_TO = re.compile(
    r"\b(?:we'?ll|we\s+will|we'?re|we\s+are|there'?ll|there\s+will)\s+(?:now\s+)?(?:be\s+)?"
    rf"(?P<a>\d+){_PEOPLE_UNIT}?"
    r"|\b(?:headcount|head\s+count|number\s+of\s+(?:people|attendees|guests)|attendees|"
    r"attendee\s+count|group\s+size)\s+(?:to|is|=|->|now|at)?\s*(?P<b>\d+)"
    rf"|\b(?:make\s+it|now|actually|change\s+it\s+to|to|for)\s+(?:we'?re\s+|it'?s\s+)?(?P<c>\d+){_PEOPLE_UNIT}"
    rf"|\b(?P<d>\d+){_PEOPLE_UNIT}\s+(?:now|instead)\b"
    r"|人数\s*(?:改|换|调|变|更新|修改)?\s*(?:成|为|到)?\s*(?P<e>\d+)"
    r"|(?:变成|改成|改为|增加到|减少到|加到|减到|换成)\s*(?P<f>\d+)\s*(?:个|位|名)?\s*人"
)
_HEADCOUNT_MORE = re.compile(
    r"\badd\s+(?:another\s+)?(?P<a>\d+)\s*(?:more\s+)?(?:people|ppl|persons?|attendees?|guests?|seats?)"
    r"|\b(?P<b>\d+)\s+more\s+(?:people|ppl|persons?|attendees?|guests?|colleagues?)"
    r"|\b(?P<one>add\s+(?:another|1\s+more)\s+(?:person|attendee|guest|seat)|another\s+person"
    r"\s+(?:is\s+)?(?:joining|coming))\b"
    r"|(?:再|还要|还得|另外)?\s*(?<!我)(?:加|多|增加)\s*(?P<c>\d+)\s*(?:个|位|名)?\s*(?:人|同事)"
)
_HEADCOUNT_FEWER = re.compile(
    r"\b(?P<a>\d+)\s+(?:fewer|less)\s+(?:people|ppl|persons?|attendees?)"
    r"|\b(?:one|1)\s+(?:person\s+)?(?:less|fewer)\b(?P<one>)"
    r"|少\s*(?P<c>\d+)\s*(?:个|位|名)?\s*(?:人|同事)"
)


def _headcount(s: str) -> tuple[int | None, int | None, str]:
    """The head count a change asks for: (new count, change by, the text without it)."""
    for pattern, sign in ((_HEADCOUNT_MORE, 1), (_HEADCOUNT_FEWER, -1)):
        match = pattern.search(s)
        if match is not None:
            numbers = [v for k, v in match.groupdict().items() if k != "one" and v]
            n = int(numbers[0]) if numbers else 1
            return None, sign * n, s[: match.start()] + " " + s[match.end() :]
    match = _HEADCOUNT_TO.search(s)
    if match is not None:
        n = int(next(v for v in match.groupdict().values() if v))
        return n, None, s[: match.start()] + " " + s[match.end() :]
    return None, None, s


_TARGET = re.compile(
    # "to" before a verb ("need to reschedule") says nothing of where the booking goes.
    r"\b(?:to|into|until)\b\s+(?!(?:move|reschedule|push|change|shift|postpone|delay|bump|"
    r"cancel|book|make|get|have|be|do|see|ask|know|check|switch|swap|update|rebook)\b)|(?:改到|挪到|换到|调到|调整到|移到|提前到|推迟到|延后到|推到|延到|改成|换成|改在|放到)"
)


@dataclass(frozen=True)
class MoveAsk:
    """What the words say. Source: code, day, start (minutes), room; target: day, start, end,
    room, or a shift in minutes."""

    code: str | None = None
    day: date | None = None
    start: int | None = None
    room: str | None = None
    to_day: date | None = None
    to_start: int | None = None
    to_end: int | None = None
    to_room: str | None = None
    shift: int | None = None
    to_attendees: int | None = None  # a new head count
    more_attendees: int | None = None  # so many more (fewer, when negative)

    @property
    def names_a_booking(self) -> bool:
        return self.code is not None or self.start is not None or self.room is not None

    @property
    def names_a_change(self) -> bool:
        return any(
            v is not None
            for v in (
                self.to_day,
                self.to_start,
                self.to_room,
                self.shift,
                self.to_attendees,
                self.more_attendees,
            )
        )


def _minutes(found: re.Match[str]) -> int:
    match = _AMOUNT_ONE.search(found.group(0))
    assert match is not None  # noqa: S101 (the pattern holds an amount)
    n, unit = match["n"], match["u"]
    amount = 0.5 if n in ("半", "half an") or n.startswith("half") else 1.0
    if n not in ("a", "an", "one", "半") and not n.startswith("half"):
        amount = float(n)
    per = 1 if unit.startswith(("m", "分")) else 15 if unit.startswith("刻") else 60
    return round(amount * per)


def _span(s: str) -> tuple[int | None, int | None, str]:
    span, rest = extract_time_span(s, text_period(s))
    return span.start, span.end, rest


def _room(s: str, rooms: Sequence[RoomName]) -> str | None:
    found = find_rooms(s, rooms)
    return found.codes[0] if len(found.codes) == 1 else None


_MOVE_VERB = re.compile(
    r"\b(?:move|push|pull|reschedule|postpone|shift|delay|bump|change\s+(?:the\s+)?time|to\s+\d)"
    r"|改到|挪到|换到|调到|推迟|提前|改期|延后"
)


def parse_move(text: str, *, today: date, rooms: Sequence[RoomName]) -> MoveAsk:
    s = normalize(text)
    codes = [f"B{int(m['n'])}" for m in _CODE.finditer(s)]
    s = _CODE.sub(" ", s)
    to_attendees, more_attendees, rest = _headcount(s)
    if (to_attendees or more_attendees) and not _MOVE_VERB.search(rest):
        # Only the head count changes: every other word names the booking ("add 2 people to
        # my 3pm", "明天下午3点那个会人数改成4个").
        day, rest = extract_date(rest, today)
        start, _, rest = _span(rest)
        return MoveAsk(
            code=codes[0] if len(codes) == 1 else None,
            day=day,
            start=start,
            room=_room(rest, rooms),
            to_attendees=to_attendees,
            more_attendees=more_attendees,
        )
    s = rest
    shift = None
    days = _DAYS_LATER.search(s) or _DAYS_EARLIER.search(s)
    if days is not None:
        # "push it to the day after that, same time", "往后顺延一天, 时间不变": whole days
        sign = 1 if days.re is _DAYS_LATER else -1
        shift = sign * int(days["n"] or 1) * 24 * 60
        s = s[: days.start()] + " " + s[days.end() :]
    for pattern, sign in ((_LATER, 1), (_EARLIER, -1)) if shift is None else ():
        match = pattern.search(s)
        if match is not None:
            shift = sign * _minutes(match)
            s = s[: match.start()] + " " + s[match.end() :]
            break
    target = _TARGET.search(s) if shift is None else None
    source, goal = (s[: target.start()], s[target.end() :]) if target else (s, "")
    day, source_rest = extract_date(source, today)
    start, _, source_rest = _span(source_rest)
    to_day, goal_rest = extract_date(goal, today) if goal else (None, "")
    to_start, to_end, goal_rest = _span(goal_rest) if goal else (None, None, "")
    if goal and to_start is None and re.match(r"\s*\d{1,2}(?![\d:.])", goal_rest):
        # "moved to 11": a bare hour where the booking goes is a time of day.
        to_start, to_end, goal_rest = _span(f"at {goal_rest.strip()}")
    return MoveAsk(
        code=codes[0] if len(codes) == 1 else None,
        day=day,
        start=start,
        room=_room(source_rest, rooms),
        to_day=to_day,
        to_start=to_start,
        to_end=to_end,
        to_room=_room(goal_rest, rooms) if goal else None,
        shift=shift,
        to_attendees=to_attendees,
        more_attendees=more_attendees,
    )


# --- against the person's bookings ------------------------------------------------------------


@dataclass(frozen=True)
class MovePlan:
    """The booking and where it goes, or why that cannot be said for sure (``problem``:
    no_booking, several, no_change, same, past, not_named), with the candidates seen."""

    booking: Mapping[str, Any] | None = None
    room: str | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    problem: str | None = None
    candidates: tuple[Mapping[str, Any], ...] = ()
    sure: bool = False  # the words name the booking and the change: no need to confirm
    attendees: int | None = None  # a new head count (None: as it is)

    def to_json(self) -> dict[str, Any]:
        return {
            "booking": (self.booking or {}).get("booking_id"),
            "attendees": self.attendees,
            "room": self.room,
            "start_at": self.start_at.isoformat() if self.start_at else None,
            "end_at": self.end_at.isoformat() if self.end_at else None,
            "problem": self.problem,
            "sure": self.sure,
        }


def _local(value: Any, now: datetime) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment.astimezone(now.tzinfo)


def _matches(ask: MoveAsk, booking: Mapping[str, Any], now: datetime) -> bool:
    if booking.get("status") != "confirmed":
        return False
    start = _local(booking["start_at"], now)
    if ask.code is not None:
        return booking["booking_id"] == ask.code
    if _local(booking["end_at"], now) <= now:
        return False
    if ask.day is not None and start.date() != ask.day:
        return False
    if ask.start is not None and start.hour * 60 + start.minute != ask.start:
        return False
    return ask.room is None or booking["room_id"] == ask.room


def resolve_move(ask: MoveAsk, bookings: Sequence[Mapping[str, Any]], now: datetime) -> MovePlan:
    """The one booking the words name and its new room and span (the length kept unless a
    new end is named), or the problem that makes the assistant ask."""
    found = tuple(
        sorted((b for b in bookings if _matches(ask, b, now)), key=lambda b: str(b["start_at"]))
    )
    if not ask.names_a_change:
        return MovePlan(problem="no_change", candidates=found)
    if not found:
        return MovePlan(problem="no_booking")
    if len(found) > 1:
        return MovePlan(problem="several", candidates=found)
    booking = found[0]
    start, end = _local(booking["start_at"], now), _local(booking["end_at"], now)
    day = ask.to_day or start.date()
    midnight = datetime(day.year, day.month, day.day, tzinfo=now.tzinfo)
    if ask.shift is not None:
        new_start = start + timedelta(minutes=ask.shift)
    elif ask.to_start is not None:
        new_start = midnight + timedelta(minutes=ask.to_start)
    else:
        new_start = midnight + timedelta(hours=start.hour, minutes=start.minute)
    new_end = (
        midnight + timedelta(minutes=ask.to_end)
        if ask.to_end is not None and ask.shift is None
        else new_start + (end - start)
    )
    room = ask.to_room or booking["room_id"]
    had = int(booking.get("attendees") or 1)
    attendees = ask.to_attendees
    if ask.more_attendees is not None:
        attendees = had + ask.more_attendees
    if attendees == had:
        attendees = None
    plan = MovePlan(booking, room, new_start, new_end, candidates=found, attendees=attendees)
    if new_end <= new_start:
        return MovePlan(booking, problem="bad_time", candidates=found)
    if attendees is not None and attendees < 1:
        return MovePlan(booking, problem="bad_count", candidates=found)
    same_place = (room, new_start, new_end) == (booking["room_id"], start, end)
    if same_place and attendees is None:
        return MovePlan(booking, problem="same", candidates=found)
    if new_start < now:
        return MovePlan(booking, room, new_start, new_end, problem="past", candidates=found)
    # Sure when the words name the booking (a code, its start, its room, or its day when that
    # day holds only this one of theirs): "move my meeting to 4pm" is confirmed first even when
    # one booking matches.
    return replace(plan, sure=ask.names_a_booking or ask.day is not None)


def ask_to_json(ask: MoveAsk) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, date) else v) for k, v in ask.__dict__.items()}


def ask_from_json(data: Mapping[str, Any] | None) -> MoveAsk | None:
    if not data:
        return None
    known = {k: data.get(k) for k in MoveAsk.__dataclass_fields__}
    for name in ("day", "to_day"):
        value = known[name]
        if value:
            known[name] = date.fromisoformat(str(value))
    return MoveAsk(**known)


def move_ask(
    text: str,
    *,
    today: date,
    rooms: Sequence[RoomName],
    conversation: Sequence[Mapping[str, Any]] = (),
) -> MoveAsk:
    """The move this turn asks for: its own words, on top of the move the turn before asked
    about (a follow-up: "yes", "the 2pm one", "to 4pm instead") when that turn asked."""
    ask = parse_move(text, today=today, rooms=rooms)
    earlier = (conversation[-1].get("understood") or {}) if conversation else {}
    before = ask_from_json(earlier.get("move_ask"))
    made = made_just_before(conversation)
    if made is not None and ask.code is None:
        if not ask.names_a_change:
            # "actually make it 4-5", "friday instead" right after booking it: all it says is
            # where the booking goes.
            ask = parse_move(f"to {text}", today=today, rooms=rooms)
        if not ask.names_a_booking and ask.day is None:
            return replace(ask, code=made)  # "make it 4 people instead" right after booking it
    listed = listed_just_before(conversation)
    if listed is not None and ask.code is None and not ask.names_a_booking and ask.day is None:
        ask = replace(ask, code=listed)  # "move it an hour earlier" after a list of one
    if before is None or (earlier.get("move") or {}).get("ready"):
        return ask
    given = {k: v for k, v in ask.__dict__.items() if v is not None}
    return replace(before, **given)


def made_just_before(conversation: Sequence[Mapping[str, Any]]) -> str | None:
    """The booking the turn before made or changed ("Booked R3 ... Booking B204.", "Moved
    booking B204 ..."): what "it", "make it 4 people" and "改成4个人" right after refer to."""
    if not conversation:
        return None
    last = conversation[-1]
    job = (last.get("understood") or {}).get("job")
    if job not in ("book", "move"):
        return None
    reply = str(last.get("reply") or "")
    if reply.rstrip().endswith(("?", "？")):
        return None  # it asked: the answer follows up on its question
    codes = tuple(dict.fromkeys(re.findall(r"\bB\d{1,9}\b", reply)))
    return codes[0] if len(codes) == 1 else None


def listed_just_before(conversation: Sequence[Mapping[str, Any]]) -> str | None:
    """The one booking the turn before listed ("what do I have tomorrow" answered with one):
    what "it" right after refers to. None when it listed several, or none."""
    if not conversation:
        return None
    last = conversation[-1]
    if (last.get("understood") or {}).get("job") != "list":
        return None
    codes = tuple(dict.fromkeys(re.findall(r"\bB\d{1,9}\b", str(last.get("reply") or ""))))
    return codes[0] if len(codes) == 1 else None
