"""The time span a request names: ranges, starts with durations, periods (下午, pm)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from bookings.assistant.parsing.text import blank, search_all

# --- times ----------------------------------------------------------------------------------

_AM, _PM, _NOON_PERIOD = "am", "pm", "noon"
END_BEFORE_START, NO_END = "end_before_start", "no_end"
_ZH_PERIODS = {
    "上午": _AM,
    "早上": _AM,
    "早晨": _AM,
    "凌晨": _AM,
    "早": _AM,
    "中午": _NOON_PERIOD,
    "下午": _PM,
    "午后": _PM,
    "傍晚": _PM,
    "晚上": _PM,
    "夜里": _PM,
    "夜间": _PM,
    "晚": _PM,
}
_ZH_PERIOD = "|".join(sorted(_ZH_PERIODS, key=len, reverse=True))
_TEXT_PERIOD = re.compile(
    r"上午|早上|早晨|凌晨|中午|下午|午后|傍晚|晚上|夜里|今晚|明晚"
    r"|\b(?:morning|afternoon|evening|tonight|night)\b"
)
_TEXT_PERIODS = {"morning": _AM, "afternoon": _PM, "evening": _PM, "tonight": _PM, "night": _PM}
_TEXT_PERIODS |= {"今晚": _PM, "明晚": _PM} | _ZH_PERIODS


def _token(n: int) -> str:
    """A time of day: "14:00", "2pm", "2:30 p.m.", "下午2点半", "10点15分", "3 o'clock"."""
    return (
        rf"(?:(?P<p{n}>{_ZH_PERIOD})\s*)?"
        rf"(?<!\d)(?P<h{n}>\d{{1,2}})(?!\d)"
        rf"(?:\s*:\s*(?P<m{n}>\d{{2}})"
        rf"|\s*(?P<d{n}>点钟?|时)"
        rf"(?:(?P<half{n}>半)|(?P<q{n}>[13])\s*刻|\s*(?P<cm{n}>\d{{1,2}})\s*分(?!钟)"
        rf"|(?P<cx{n}>\d{{2}})(?![\d人位名个]))?"
        rf"|\s*(?P<oc{n}>o'?\s*clock))?"
        rf"(?:\s*(?P<ap{n}>[ap])\.?\s?m\b\.?)?"
    )


_SEPARATOR = r"\s*(?P<sep>-|\bto\b|\buntil\b|\btill\b|\bthru\b|\bthrough\b|\band\b|到|至)\s*"
PEOPLE = (
    r"(?:people|persons?|pers|attendees?|participants?|guests?|colleagues|members|ppl|pax|heads|"
    r"seats|ppl)\b"
)
ZH_PEOPLE = r"(?:个人|个同事|人|位|名)"
_RANGE = re.compile(
    rf"(?:(?P<lead>\bfrom|\bbetween|\bat|从)\s*)?{_token(1)}{_SEPARATOR}{_token(2)}"
    rf"(?!\s*(?:{PEOPLE}|{ZH_PEOPLE}))"
)
_START = re.compile(
    r"(?:(?P<lead>\bat|\bfrom|\bstart(?:s|ing)?(?:\s+at)?|\bbegin(?:s|ning)?(?:\s+at)?|从)\s*)?"
    + _token(1)
)
_DURATIONS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], float]], ...] = (
    (re.compile(r"\b(?:an?|1)\s+hours?\s+and\s+a\s+half\b"), lambda m: 90),
    (
        re.compile(r"\b(?P<n>\d+)\s+and\s+a\s+half\s+hours?\b"),
        lambda m: (int(m["n"]) + 0.5) * 60,
    ),
    (
        re.compile(
            r"(?<![\d.])(?P<n>\d+(?:\.\d+)?)\s*-?\s*(?:hours?|hrs?|h)\b"
            r"(?:\s*(?:and\s+)?(?P<min>\d{1,2})\s*(?:minutes?|mins?|m)\b)?"
        ),
        lambda m: float(m["n"]) * 60 + int(m["min"] or 0),
    ),
    (
        re.compile(
            r"(?<![\d.])(?P<n>\d+(?:\.\d+)?)\s*个?\s*(?P<half>半)?\s*(?:小时|钟头)"
            r"(?:\s*(?P<min>\d{1,2})\s*分钟?)?"
        ),
        lambda m: float(m["n"]) * 60 + (30 if m["half"] else 0) + int(m["min"] or 0),
    ),
    (
        re.compile(r"\bhalf\s+an?\s+hour\b|\ba\s+half\s+hour\b|半\s*个?\s*(?:小时|钟头)"),
        lambda m: 30,
    ),
    (re.compile(r"\ban\s+hour\b"), lambda m: 60),
    # "45 minutes", "a 45-minute sync"
    (re.compile(r"(?<![\d.])(?P<n>\d+)\s*-?\s*(?:minutes?|mins?|分钟)"), lambda m: int(m["n"])),
)


_HEADCOUNT_BEFORE = re.compile(r"\b(?:for|of)\s*$")


@dataclass(frozen=True)
class _Span:
    start: int | None = None  # minutes after midnight of the booking day
    end: int | None = None  # may exceed 24 * 60 when a duration runs past midnight
    problem: str | None = None
    # Said without a start (an answer to "until when?"): "an hour", "till 4".
    duration: int | None = None
    until: int | None = None  # minutes after midnight, as written (a bare 4 is 4:00)


_UNTIL = re.compile(
    r"(?:\btill|\buntil|\bto|\bending\s+at|\bends?\s+at|\bfinish(?:ing|es)?\s+(?:at|by)|到|至)\s*"
    + _token(1)
    + rf"(?!\s*(?:{PEOPLE}|{ZH_PEOPLE}))"
)


_UNTIL_BEFORE = re.compile(
    r"(?:\btill|\buntil|\bto|\bending\s+at|\bends?\s+at|\bfinish(?:ing|es)?\s+(?:at|by)|到|至)\s*$"
)


def later_end(start: int, until: int) -> int:
    """An end said alone, after ``start``: "till 4" after a 2 o'clock start is 16:00."""
    if until <= start and until < 12 * 60:
        return until + 12 * 60
    return until


@dataclass(frozen=True)
class _Clock:
    hour: int
    minute: int
    period: str | None  # written next to this time: am, pm or noon
    explicit: bool  # clearly a time of day rather than any number
    zero_padded: bool


# The part of the day a request names ("tomorrow afternoon", "明晚"): am, noon or pm as a time
# of day reads it ("at 7 in the evening" is 19:00), and an evening of its own for what an
# availability answer lists (an evening is not the afternoon).
_EVENING = "evening"
_EVENING_WORDS = ("evening", "tonight", "night", "傍晚", "晚上", "夜里", "今晚", "明晚")
_DAY_PARTS = _TEXT_PERIODS | dict.fromkeys(_EVENING_WORDS, _EVENING)


def day_part(s: str) -> str | None:
    """The part of the day the text names ("am", "noon", "pm" or "evening"), or None."""
    match = _TEXT_PERIOD.search(s)
    return _DAY_PARTS[match.group(0)] if match else None


def period_of(part: str | None) -> str | None:
    """A part of the day as a time of day reads it: an evening is pm."""
    return _PM if part == _EVENING else part


def text_period(s: str) -> str | None:
    return period_of(day_part(s))


def _clock(match: re.Match[str], n: int) -> _Clock | None:
    def group(name: str) -> str | None:
        return match.group(f"{name}{n}")

    hour_text = group("h") or ""
    minute = 0
    if group("m"):
        minute = int(group("m") or 0)
    elif group("half"):
        minute = 30
    elif group("q"):
        minute = 15 * int(group("q") or 0)
    elif group("cm") or group("cx"):
        minute = int(group("cm") or group("cx") or 0)
    period = _ZH_PERIODS[group("p") or ""] if group("p") else None
    if group("ap"):
        period = _AM if group("ap") == "a" else _PM
    hour = int(hour_text)
    if hour > 24 or minute > 59 or (hour == 24 and minute):
        return None
    explicit = any(group(name) for name in ("m", "d", "oc", "ap", "p"))
    return _Clock(hour, minute, period, explicit, hour_text.startswith("0"))


def _hour24(hour: int, period: str | None) -> int:
    if period == _AM:
        return 0 if hour == 12 else hour
    if period == _PM:
        return hour + 12 if 1 <= hour <= 11 else hour
    if period == _NOON_PERIOD:
        return hour + 12 if 1 <= hour <= 5 else hour
    return hour


def _minutes(clock: _Clock, period: str | None) -> int:
    return _hour24(clock.hour, period) * 60 + clock.minute


def _guess_start(clock: _Clock) -> int:
    # Nobody books a meeting room at 2 a.m.: a bare "2点" or "at 2" is the afternoon.
    if 1 <= clock.hour <= 6 and not clock.zero_padded:
        return _minutes(clock, _PM)
    return _minutes(clock, None)


def _flip(period: str | None) -> str:
    return _AM if period in (_PM, _NOON_PERIOD) else _PM


def _resolve_range(first: _Clock, second: _Clock, text_period: str | None) -> tuple[int, int]:
    """Apply am/pm, 上午/下午 and the afternoon fallback to a start-end pair."""
    start_period, end_period = first.period, second.period
    start_inherited = end_inherited = False
    if start_period is None and end_period is not None:
        start_period, start_inherited = end_period, True
    elif end_period is None and start_period is not None:
        end_period, end_inherited = start_period, True
    elif start_period is None and end_period is None and text_period is not None:
        start_period = end_period = text_period
        start_inherited = end_inherited = True

    start = _minutes(first, start_period) if start_period else _guess_start(first)
    end = _minutes(second, end_period)
    if end_period == _AM and second.hour == 12 and end <= start:
        end = 12 * 60 + second.minute  # "上午11点到12点半", "11am-12": the end is at noon
    if end <= start and start_inherited:
        # "11-1pm" is 11:00-13:00, not 23:00-13:00.
        flipped = _minutes(first, _flip(start_period))
        if flipped < end:
            start = flipped
    if end <= start and (second.period is None or end_inherited) and second.hour < 12:
        # "上午11点到1点", "2点到3点": the end is in the afternoon.
        end = _minutes(second, _PM)
    return start, end


def extract_time_span(s: str, text_period: str | None) -> tuple[_Span, str]:
    """Find a start-end range, or a start and a duration, and blank them out of ``s``."""
    duration: float | None = None
    for pattern, minutes in _DURATIONS:
        match = pattern.search(s)
        if match is not None:
            duration = duration if duration is not None else minutes(match)
            s = blank(s, match)

    found = _first_range(s, text_period, bare=False)
    if found is not None:
        return found

    for match in search_all(_START, s):
        clock = _clock(match, 1)
        if clock is None or not (clock.explicit or match["lead"]):
            continue
        if _UNTIL_BEFORE.search(s, 0, match.start()):
            continue  # "till 4pm": an end, not a start
        period = clock.period or text_period
        start = _minutes(clock, period) if period else _guess_start(clock)
        s = blank(s, match)
        until, s = _until(s, text_period) if duration is None else (None, s)
        if until is not None:
            end = later_end(start, until)
            return _Span(start, end, END_BEFORE_START if end <= start else None), s
        if duration is None:
            return _Span(start, None, NO_END), s
        end = start + round(duration)
        return _Span(start, end, END_BEFORE_START if end <= start else None), s

    # Last resort: "tomorrow 10-11", but not the headcount in "for 3-4".
    found = _first_range(s, text_period, bare=True)
    if found is not None:
        return found
    until, s = _until(s, text_period)
    return _Span(duration=round(duration) if duration else None, until=until), s


def _until(s: str, text_period: str | None) -> tuple[int | None, str]:
    """An end said alone ("till 4", "until 5pm", "到4点"), as written, blanked out of ``s``."""
    for match in search_all(_UNTIL, s):
        clock = _clock(match, 1)
        if clock is not None:
            return _minutes(clock, clock.period or text_period), blank(s, match)
    return None, s


def _first_range(s: str, text_period: str | None, *, bare: bool) -> tuple[_Span, str] | None:
    for match in search_all(_RANGE, s):
        if match["sep"] == "and" and match["lead"] != "between":
            continue
        first, second = _clock(match, 1), _clock(match, 2)
        if first is None or second is None:
            continue
        marked = first.explicit or second.explicit or match["lead"] or text_period
        if not marked and (not bare or _HEADCOUNT_BEFORE.search(s, 0, match.start())):
            continue
        start, end = _resolve_range(first, second, text_period)
        problem = END_BEFORE_START if end <= start else None
        return _Span(start, end, problem), blank(s, match)
    return None


def at_minutes(midnight: datetime, minutes: int) -> datetime:
    days, minute_of_day = divmod(minutes, 24 * 60)
    day = midnight.date() + timedelta(days=days)
    hour, minute = divmod(minute_of_day, 60)
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=midnight.tzinfo)
