"""Turn an employee's booking request (English or Chinese) into booking constraints.

Pure functions, standard library only: no Django, no database. Booking rules (past dates,
horizon, opening hours, capacity) are the booking service's business, not this module's.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

EQUIPMENT = ("display", "phone", "projector", "video", "whiteboard")
FIELDS = ("date", "time", "attendees")


@dataclass(frozen=True)
class BookingRequest:
    start_at: datetime
    end_at: datetime
    attendees: int
    equipment: tuple[str, ...]
    room_code: str | None
    language: str


@dataclass(frozen=True)
class Clarification:
    missing: tuple[str, ...]
    question: str
    language: str


def parse_booking_request(
    text: str, *, now: datetime, tz: ZoneInfo
) -> BookingRequest | Clarification:
    """Read date, time range, attendees, equipment and room code out of ``text``.

    ``now`` anchors relative dates ("tomorrow", "周五", "Sep 28"); a naive ``now`` is read as
    wall time in ``tz``. Return a Clarification naming every missing field (in the order of
    FIELDS) when the request is incomplete, has an end not after its start, or is not a booking
    request at all (then all three fields are missing).
    """
    language = "zh" if _CJK.search(text) else "en"
    local_now = now.astimezone(tz) if now.tzinfo is not None else now.replace(tzinfo=tz)
    today = local_now.date()

    normalized = _normalize(text)
    room_code, rest = _extract_room_code(normalized)
    equipment = _extract_equipment(rest)
    day, rest = _extract_date(rest, today)
    span, rest = _extract_time_span(rest, _text_period(normalized))
    attendees, rest = _extract_attendees(rest)

    looks_like_booking = (
        bool(_INTENT.search(normalized))
        or room_code is not None
        or bool(equipment)
        or attendees is not None
        or (day is not None and span.end is not None)
    )
    if not looks_like_booking:
        return Clarification(FIELDS, _question(FIELDS, language, None), language)

    problem = span.problem
    start_at = end_at = None
    if day is not None and span.start is not None and span.end is not None:
        midnight = datetime(day.year, day.month, day.day, tzinfo=tz)
        start_at = _at_minutes(midnight, span.start)
        end_at = _at_minutes(midnight, span.end)
        if end_at <= start_at:
            problem = _END_BEFORE_START

    missing = tuple(
        name
        for name, absent in (
            ("date", day is None),
            ("time", problem is not None or span.start is None or span.end is None),
            ("attendees", attendees is None),
        )
        if absent
    )
    if missing or start_at is None or end_at is None or attendees is None:
        return Clarification(missing, _question(missing, language, problem), language)
    return BookingRequest(
        start_at=start_at,
        end_at=end_at,
        attendees=attendees,
        equipment=equipment,
        room_code=room_code,
        language=language,
    )


# --- normalisation --------------------------------------------------------------------------

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_DASHES = re.compile(r"[\u2010-\u2015\u2212\u301c\uff5e~]")
# "快一点", "早一点儿" mean "a bit faster/earlier", not "one o'clock".
_NOT_ONE_OCLOCK = re.compile(r"([快慢早晚大小多少好高低近远长短宽])一点(?![钟半\d到至\-])")
_CN_NUMBER = re.compile(r"(?<![周期拜])[零\u3007一二两三四五六七八九十]+")
_CN_DIGITS = {
    "零": 0,
    "\u3007": 0,  # ideographic zero
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_EN_WORDS = (
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
)
_EN_NUMBERS = {word: str(value) for value, word in enumerate(_EN_WORDS, start=1)}
_EN_NUMBER = re.compile(r"\b(" + "|".join(_EN_NUMBERS) + r")\b")
_NOON = re.compile(r"\b(?:12\s*)?(?:noon|midday)\b")
# A greeting names a part of the day that says nothing about the meeting.
_GREETING = re.compile(
    r"(?:早上|早晨|上午|中午|下午|晚上)好|\bgood\s+(?:morning|afternoon|evening)\b"
)


def _normalize(text: str) -> str:
    """Fold width, case, dashes and number words so that later patterns see ASCII digits."""
    s = unicodedata.normalize("NFKC", text).lower()
    s = _DASHES.sub("-", s)
    s = _GREETING.sub(" ", s)
    s = _NOT_ONE_OCLOCK.sub(r"\1一些", s)
    s = _CN_NUMBER.sub(_cn_number_to_digits, s)
    s = _EN_NUMBER.sub(lambda m: _EN_NUMBERS[m.group(1)], s)
    return _NOON.sub("12pm", s)


def _cn_number_to_digits(match: re.Match[str]) -> str:
    run = match.group(0)
    if "十" in run:
        tens, _, units = run.partition("十")
        if len(tens) > 1 or len(units) > 1 or "十" in units:
            return run
        value = (_CN_DIGITS.get(tens, -99) if tens else 1) * 10
        value += _CN_DIGITS.get(units, -99) if units else 0
        return str(value) if value > 0 else run
    if len(run) == 1 or "零" in run or "\u3007" in run or len(run) == 4:
        return "".join(str(_CN_DIGITS[ch]) for ch in run)
    return run  # "一两个人" is an estimate, not 12


def _blank(s: str, match: re.Match[str]) -> str:
    return s[: match.start()] + " " * (match.end() - match.start()) + s[match.end() :]


def _search_all(pattern: re.Pattern[str], s: str) -> Iterator[re.Match[str]]:
    """Yield every match, overlapping ones included, leftmost first."""
    pos = 0
    while (match := pattern.search(s, pos)) is not None:
        yield match
        pos = match.start() + 1


# --- room and equipment ---------------------------------------------------------------------

_ROOM_CODE = re.compile(r"(?<![a-z0-9])r\d+(?![a-z0-9])")

_EQUIPMENT_PATTERNS = {
    "display": re.compile(
        r"\b(?:screens?|displays?|monitors?|tvs?)\b|显示屏|显示器|大屏|屏幕|电视"
    ),
    "phone": re.compile(r"\b(?:tele|speaker|conference\s*)?phones?\b|电话|座机"),
    "projector": re.compile(r"\bproject(?:or|ors|ion)\b|投影"),
    "video": re.compile(r"\bvideo|视频"),
    "whiteboard": re.compile(r"\bwhite\s*boards?\b|白板"),
}
_NEGATED = re.compile(
    r"(?:\bno|\bwithout|\b(?:do\s+not|don'?t|not)\s+(?:need|want)|\bno\s+need\s+for)"
    r"\s+(?:an?\s+|the\s+|any\s+)?$"
    r"|(?:不要|不需要|不用|无需|不必|没有|无)\s*$"
)


def _extract_room_code(s: str) -> tuple[str | None, str]:
    match = _ROOM_CODE.search(s)
    if match is None:
        return None, s
    return match.group(0).upper(), _blank(s, match)


def _extract_equipment(s: str) -> tuple[str, ...]:
    found = {
        name
        for name, pattern in _EQUIPMENT_PATTERNS.items()
        for match in pattern.finditer(s)
        if not _NEGATED.search(s[max(0, match.start() - 24) : match.start()])
    }
    return tuple(sorted(found))


# --- dates ----------------------------------------------------------------------------------

_MONTHS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH = (
    r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
_ORDINAL = r"(?:st|nd|rd|th)?"
_YEAR_MONTH_DAY = re.compile(
    r"(?<!\d)(?P<year>\d{4})\s*(?:年\s*(?P<zm>\d{1,2})\s*月\s*(?P<zd>\d{1,2})\s*[日号]?"
    r"|[-/.]\s*(?P<month>\d{1,2})\s*[-/.]\s*(?P<day>\d{1,2})(?!\d))"
)
_DAY_MONTH_NAME = re.compile(
    rf"(?<![\d:.])(?P<day>\d{{1,2}}){_ORDINAL}\s*(?:of\s+)?{_MONTH}(?:,?\s*(?P<year>\d{{4}})(?!\d))?"
)
_MONTH_NAME_DAY = re.compile(
    rf"\b{_MONTH}\s*(?P<day>\d{{1,2}}){_ORDINAL}(?!\d)(?:,?\s*(?P<year>\d{{4}})(?!\d))?"
)
_ZH_MONTH_DAY = re.compile(r"(?<!\d)(?P<month>\d{1,2})\s*月\s*(?P<day>\d{1,2})\s*(?:[日号]|(?!\d))")
_NUMERIC_MONTH_DAY = re.compile(
    r"(?<![\d/:.])(?P<a>\d{1,2})/(?P<b>\d{1,2})(?:/(?P<year>\d{4}|\d{2}))?(?![\d/:])"
)
_RELATIVE_DAYS = (
    (re.compile(r"\b(?:the\s+)?day\s+after\s+tomorrow\b"), 2),
    (re.compile(r"\b(?:tomorrow|tmrw|tmr)\b"), 1),
    (re.compile(r"\b(?:today|tonight)\b|\bthis\s+(?=morning|afternoon|evening)"), 0),
    (re.compile(r"大后天"), 3),
    (re.compile(r"后天"), 2),
    (re.compile(r"明天|明日|明(?=[早晚])"), 1),
    (re.compile(r"今天|今日|今(?=[早晚])"), 0),
)
_EN_WEEKDAYS = {
    "mon": 0,
    "tue": 1,
    "wed": 2,
    "thu": 3,
    "fri": 4,
    "sat": 5,
    "sun": 6,
}
_EN_WEEKDAY = re.compile(
    r"\b(?:(?P<which>next|this|coming|on)\s+)?"
    r"(?P<name>mon|tue|wed|thu|fri|sat|sun)(?:day|s|sday|nesday|rsday|r|rs|urday)?\b"
)
_ZH_WEEKDAY = re.compile(
    r"(?P<which>下下个?|下个?|这个?|本)?\s*(?:周|星期|礼拜)\s*(?P<name>[一二三四五六日天1-7])"
)
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_DAY_OF_MONTH = re.compile(
    r"\b(?:on\s+)?the\s+(?P<day>\d{1,2})(?:st|nd|rd|th)\b"
    r"|(?<![\d月])(?P<zday>\d{1,2})\s*[号日](?!\s*(?:会议室|房|楼|室|门|厅))"
)


def _extract_date(s: str, today: date) -> tuple[date | None, str]:
    """Find the first date, absolute forms before relative ones, and blank it out of ``s``."""
    for pattern in (_YEAR_MONTH_DAY, _DAY_MONTH_NAME, _MONTH_NAME_DAY, _ZH_MONTH_DAY):
        match = pattern.search(s)
        if match is None:
            continue
        parts = match.groupdict()
        month = parts.get("month") or parts.get("zm") or ""
        month_number = _MONTHS[month[:3]] if month.isalpha() else int(month)
        day = int(parts.get("day") or parts.get("zd") or 0)
        if parts.get("year"):
            return _safe_date(int(parts["year"]), month_number, day), _blank(s, match)
        return _upcoming(today, month_number, day), _blank(s, match)

    match = _NUMERIC_MONTH_DAY.search(s)
    if match is not None:
        a, b = int(match["a"]), int(match["b"])
        month_number, day = (a, b) if a <= 12 else (b, a)  # 28/9 can only be day/month
        if match["year"]:
            year = int(match["year"])
            year += 2000 if year < 100 else 0
            return _safe_date(year, month_number, day), _blank(s, match)
        return _upcoming(today, month_number, day), _blank(s, match)

    for pattern, offset in _RELATIVE_DAYS:
        match = pattern.search(s)
        if match is not None:
            return today + timedelta(days=offset), _blank(s, match)

    match = _ZH_WEEKDAY.search(s)
    if match is not None:
        name = match["name"]
        weekday = int(name) - 1 if name.isdigit() else _ZH_WEEKDAYS[name]
        which = (match["which"] or "").rstrip("个")
        monday = today - timedelta(days=today.weekday())
        if which in ("下", "下下"):
            weeks = 1 if which == "下" else 2
            return monday + timedelta(weeks=weeks, days=weekday), _blank(s, match)
        if which in ("这", "本"):
            return monday + timedelta(days=weekday), _blank(s, match)
        return _next_weekday(today, weekday, earliest=1), _blank(s, match)

    match = _EN_WEEKDAY.search(s)
    if match is not None:
        earliest = 0 if match["which"] == "this" else 1
        weekday = _EN_WEEKDAYS[match["name"]]
        return _next_weekday(today, weekday, earliest=earliest), _blank(s, match)

    match = _DAY_OF_MONTH.search(s)
    if match is not None:
        day = int(match["day"] or match["zday"])
        for months_ahead in range(12):
            month_index = today.month - 1 + months_ahead
            candidate = _safe_date(today.year + month_index // 12, month_index % 12 + 1, day)
            if candidate is not None and candidate >= today:
                return candidate, _blank(s, match)
        return None, _blank(s, match)
    return None, s


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _upcoming(today: date, month: int, day: int) -> date | None:
    """The first ``month``/``day`` on or after ``today``; None if it never exists."""
    for year in range(today.year, today.year + 9):
        candidate = _safe_date(year, month, day)
        if candidate is not None and candidate >= today:
            return candidate
    return None


def _next_weekday(today: date, weekday: int, *, earliest: int) -> date:
    ahead = (weekday - today.weekday()) % 7
    if ahead < earliest:
        ahead += 7
    return today + timedelta(days=ahead)


# --- times ----------------------------------------------------------------------------------

_AM, _PM, _NOON_PERIOD = "am", "pm", "noon"
_END_BEFORE_START, _NO_END = "end_before_start", "no_end"
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
_PEOPLE = r"(?:people|persons?|attendees?|participants?|guests?|colleagues|members|ppl|pax|heads)\b"
_ZH_PEOPLE = r"(?:个人|个同事|人|位|名)"
_RANGE = re.compile(
    rf"(?:(?P<lead>\bfrom|\bbetween|\bat|从)\s*)?{_token(1)}{_SEPARATOR}{_token(2)}"
    rf"(?!\s*(?:{_PEOPLE}|{_ZH_PEOPLE}))"
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
            r"(?<![\d.])(?P<n>\d+(?:\.\d+)?)\s*(?:hours?|hrs?|h)\b"
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
    (re.compile(r"(?<![\d.])(?P<n>\d+)\s*(?:minutes?|mins?|分钟)"), lambda m: int(m["n"])),
)


_HEADCOUNT_BEFORE = re.compile(r"\b(?:for|of)\s*$")


@dataclass(frozen=True)
class _Span:
    start: int | None = None  # minutes after midnight of the booking day
    end: int | None = None  # may exceed 24 * 60 when a duration runs past midnight
    problem: str | None = None


@dataclass(frozen=True)
class _Clock:
    hour: int
    minute: int
    period: str | None  # written next to this time: am, pm or noon
    explicit: bool  # clearly a time of day rather than any number
    zero_padded: bool


def _text_period(s: str) -> str | None:
    match = _TEXT_PERIOD.search(s)
    return _TEXT_PERIODS[match.group(0)] if match else None


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
    if end <= start and start_inherited:
        # "11-1pm" is 11:00-13:00, not 23:00-13:00.
        flipped = _minutes(first, _flip(start_period))
        if flipped < end:
            start = flipped
    if end <= start and (second.period is None or end_inherited) and second.hour < 12:
        # "上午11点到1点", "2点到3点": the end is in the afternoon.
        end = _minutes(second, _PM)
    return start, end


def _extract_time_span(s: str, text_period: str | None) -> tuple[_Span, str]:
    """Find a start-end range, or a start and a duration, and blank them out of ``s``."""
    duration: float | None = None
    for pattern, minutes in _DURATIONS:
        match = pattern.search(s)
        if match is not None:
            duration = duration if duration is not None else minutes(match)
            s = _blank(s, match)

    found = _first_range(s, text_period, bare=False)
    if found is not None:
        return found

    for match in _search_all(_START, s):
        clock = _clock(match, 1)
        if clock is None or not (clock.explicit or match["lead"]):
            continue
        period = clock.period or text_period
        start = _minutes(clock, period) if period else _guess_start(clock)
        s = _blank(s, match)
        if duration is None:
            return _Span(start, None, _NO_END), s
        end = start + round(duration)
        return _Span(start, end, _END_BEFORE_START if end <= start else None), s

    # Last resort: "tomorrow 10-11", but not the headcount in "for 3-4".
    return _first_range(s, text_period, bare=True) or (_Span(), s)


def _first_range(s: str, text_period: str | None, *, bare: bool) -> tuple[_Span, str] | None:
    for match in _search_all(_RANGE, s):
        if match["sep"] == "and" and match["lead"] != "between":
            continue
        first, second = _clock(match, 1), _clock(match, 2)
        if first is None or second is None:
            continue
        marked = first.explicit or second.explicit or match["lead"] or text_period
        if not marked and (not bare or _HEADCOUNT_BEFORE.search(s, 0, match.start())):
            continue
        start, end = _resolve_range(first, second, text_period)
        problem = _END_BEFORE_START if end <= start else None
        return _Span(start, end, problem), _blank(s, match)
    return None


def _at_minutes(midnight: datetime, minutes: int) -> datetime:
    days, minute_of_day = divmod(minutes, 24 * 60)
    day = midnight.date() + timedelta(days=days)
    hour, minute = divmod(minute_of_day, 60)
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=midnight.tzinfo)


# --- attendees ------------------------------------------------------------------------------

_NOT_PEOPLE = r"(?!\s*(?:[:.]\d|[ap]\.?m\b|hours?\b|hrs?\b|h\b|minutes?\b|mins?\b|o'?clock|/|-))"
_ATTENDEE_RANGES = (
    re.compile(
        rf"(?<![\d.])(?P<a>\d+)\s*(?:-|\bto\b|\bor\b|到|至|或)\s*(?P<b>\d+)\s*"
        rf"(?:{_PEOPLE}|{_ZH_PEOPLE})"
    ),
    re.compile(rf"\bfor\s+(?P<a>\d+)\s*(?:-|\bto\b|\bor\b)\s*(?P<b>\d+)\b{_NOT_PEOPLE}"),
)
_ATTENDEES = (
    re.compile(rf"(?<![\d.])(?P<n>\d+)\s*(?:{_PEOPLE}|{_ZH_PEOPLE}|of\s+us\b)"),
    re.compile(r"\b(?:team|group|party)\s+of\s+(?P<n>\d+)\b"),
    re.compile(r"(?:人数|参会人数|与会人数)\s*[:为是]?\s*(?P<n>\d+)"),
    re.compile(r"(?:我们|一共|总共|共)\s*(?P<n>\d+)\s*个(?!小时|钟头|半)"),
    re.compile(rf"\bfor\s+(?P<n>\d+)\b{_NOT_PEOPLE}"),
)
_JUST_ME = re.compile(r"\b(?:just|only)\s+(?:me|myself)\b|只有我|就我自己|我自己用")


def _extract_attendees(s: str) -> tuple[int | None, str]:
    for pattern in _ATTENDEE_RANGES:
        match = pattern.search(s)
        if match is not None:
            return max(int(match["a"]), int(match["b"])) or None, _blank(s, match)
    for pattern in _ATTENDEES:
        match = pattern.search(s)
        if match is not None:
            return int(match["n"]) or None, _blank(s, match)
    if _JUST_ME.search(s):
        return 1, s
    return None, s


# --- intent and questions -------------------------------------------------------------------

_INTENT = re.compile(
    r"\b(?:book|booking|reserve|reservation|rooms?|meeting|meet|schedule|conference|huddle)\b"
    r"|订|预约|会议|房间|开会|会议室|安排"
)
_EN_PARTS = {
    "date": "which day",
    "time": "what time (start and end)",
    "attendees": "for how many people",
}
_ZH_PARTS = {"date": "日期", "time": "时间", "attendees": "人数"}


def _question(missing: tuple[str, ...], language: str, problem: str | None) -> str:
    if language == "zh":
        parts = dict(_ZH_PARTS)
        prefix = ""
        if problem == _END_BEFORE_START:
            prefix, parts["time"] = "结束时间必须晚于开始时间。", "正确的起止时间"
        elif problem == _NO_END:
            parts["time"] = "结束时间或时长"
        words = [parts[name] for name in missing]
        joined = words[0] if len(words) == 1 else "、".join(words[:-1]) + "和" + words[-1]
        return f"{prefix}请告诉我{joined}。"

    parts = dict(_EN_PARTS)
    prefix = ""
    if problem == _END_BEFORE_START:
        prefix = "The end time must be after the start time. "
    elif problem == _NO_END:
        parts["time"] = "until what time (or for how long)"
    words = [parts[name] for name in missing]
    joined = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"{prefix}{joined[0].upper()}{joined[1:]}?"
