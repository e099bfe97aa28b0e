"""The day a request names: absolute, relative (tomorrow, 后天), weekdays (周五, next Friday)."""

from __future__ import annotations

import re
from datetime import date, timedelta

from bookings.assistant.parsing.text import blank

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
    # Past days are read too, so that the reply can say they are past instead of asking.
    (re.compile(r"\b(?:the\s+)?day\s+before\s+yesterday\b"), -2),
    (re.compile(r"\byesterday\b"), -1),
    (re.compile(r"大前天"), -3),
    (re.compile(r"前天"), -2),
    (re.compile(r"昨天|昨日|昨(?=[早晚])"), -1),
)
# "in 2 days", "3天后", "in a week", "a week from today", "一周后": counted from today.
_IN_DAYS = (
    (re.compile(r"\bin\s+(?P<n>\d+)\s+days?\b"), 1),
    (re.compile(r"\b(?P<n>\d+)\s+days?\s+from\s+(?:today|now)\b"), 1),
    (re.compile(r"(?<!\d)(?P<n>\d+)\s*[天日]\s*(?:后|以后|之后)"), 1),
    (re.compile(r"\bin\s+(?:a|(?P<n>\d+))\s+weeks?\b"), 7),
    (re.compile(r"\b(?:a|(?P<n>\d+))\s+weeks?\s+from\s+(?:today|now)\b"), 7),
    (re.compile(r"(?<!\d)(?P<n>\d+)?\s*个?\s*(?:周|星期|礼拜)\s*(?:后|以后|之后)"), 7),
)
_DAY_SUFFIX = r"(?:day|s|sday|nesday|rsday|r|rs|urday)?"
_WEEKDAY_NEXT_WEEK = re.compile(
    rf"\b(?P<name>mon|tue|wed|thu|fri|sat|sun){_DAY_SUFFIX}\s+(?:of\s+)?next\s+week\b"
    rf"|\bnext\s+week(?:'s)?\s*,?\s*(?:on\s+)?(?P<name2>mon|tue|wed|thu|fri|sat|sun){_DAY_SUFFIX}\b"
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
    r"\b(?:(?P<which>next|this|coming|on|last)\s+)?"
    r"(?P<name>mon|tue|wed|thu|fri|sat|sun)(?:day|s|sday|nesday|rsday|r|rs|urday)?\b"
)
_ZH_WEEKDAY = re.compile(
    r"(?P<which>下下个?|下个?|上上个?|上个?|这个?|本)?\s*(?:周|星期|礼拜)\s*(?P<name>[一二三四五六日天1-7])"
)
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_DAY_OF_MONTH = re.compile(
    r"\b(?:on\s+)?the\s+(?P<day>\d{1,2})(?:st|nd|rd|th)\b(?!\s*(?:floor|fl\b|level|storey))"
    r"|(?<![\d月])(?P<zday>\d{1,2})\s*[号日](?!\s*(?:会议室|房|楼|室|门|厅))"
)
# A weekday written beside a date, with nothing that moves it to another week.
_EN_WEEKDAY_ONLY = re.compile(
    r"\b(?:on\s+)?(?P<name>mon|tue|wed|thu|fri|sat|sun)(?:day|s|sday|nesday|rsday|r|rs|urday)?\b"
    r"\.?,?"
)
_ZH_WEEKDAY_ONLY = re.compile(
    r"[(（]?\s*(?:周|星期|礼拜)\s*(?P<name>[一二三四五六日天1-7])\s*[)）]?"
)


# A count of days or weeks from a day the request names ("a week from tomorrow", "3 days after
# Friday", "明天起一周后"): the day named, then the count added. Read before the day alone, so
# the day is never taken without its offset.
_OFFSET_FROM = re.compile(
    r"(?<!\bin\s)\b(?:a|(?P<n>\d+))\s+(?P<unit>days?|weeks?)\s+(?:from|after)\s+"
    r"(?=(?:the\s+)?(?:day\s+after\s+)?(?:tomorrow|tmrw|tmr|next|this|coming"
    r"|mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
    r"|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?[a-z]{3}|\d{1,2}/\d{1,2})"
)
_ZH_OFFSET_FROM = re.compile(
    r"(?P<anchor>明天|后天|大后天|(?:下个?|这个?|本)?(?:周|星期|礼拜)[一二三四五六日天1-7])\s*"
    r"(?:起|开始|算起)?\s*(?P<n>\d+)?\s*个?\s*(?P<unit>天|周|星期|礼拜)\s*(?:后|以后|之后)"
)


def extract_date(s: str, today: date) -> tuple[date | None, str]:
    """Find the first date, absolute forms before relative ones, and blank it out of ``s``.
    A weekday or a day of the month written beside it ("Wednesday 9 December", "12月9日星期三",
    "Friday the 11th") is read with it: the same day, or no day at all when they disagree (the
    person is asked which day, never given one of the two). A count of days or weeks from a
    named day ("a week from tomorrow") is added to that day; without a day it reads as none."""
    offset, s = _offset_from(s)
    found, rest = _first_date(s, today)
    if found is None:
        return None, rest
    if offset:
        return found + timedelta(days=offset), rest
    return _agreeing(found, rest, today)


def _offset_from(s: str) -> tuple[int, str]:
    match = _OFFSET_FROM.search(s)
    if match is not None:
        days = 7 if match["unit"].startswith("week") else 1
        return int(match["n"] or 1) * days, blank(s, match)
    match = _ZH_OFFSET_FROM.search(s)
    if match is not None:
        days = 1 if match["unit"] == "天" else 7
        anchor_end = match.end("anchor")  # the day stays to be read; its offset goes
        return int(match["n"] or 1) * days, s[:anchor_end] + " " * (match.end() - anchor_end) + s[
            match.end() :
        ]
    return 0, s


def _agreeing(found: date, rest: str, today: date) -> tuple[date | None, str]:
    for pattern in (_EN_WEEKDAY_ONLY, _ZH_WEEKDAY_ONLY):
        match = pattern.search(rest)
        if match is not None:
            name = match["name"]
            weekday = (
                _EN_WEEKDAYS[name[:3]]
                if name[:3] in _EN_WEEKDAYS
                else (int(name) - 1 if name.isdigit() else _ZH_WEEKDAYS[name])
            )
            rest = blank(rest, match)
            if weekday != found.weekday():
                return None, rest
    match = _DAY_OF_MONTH.search(rest)
    if match is not None:
        rest = blank(rest, match)
        if int(match["day"] or match["zday"]) != found.day:
            return None, rest
    return found, rest


def _first_date(s: str, today: date) -> tuple[date | None, str]:
    for pattern in (_YEAR_MONTH_DAY, _DAY_MONTH_NAME, _MONTH_NAME_DAY, _ZH_MONTH_DAY):
        match = pattern.search(s)
        if match is None:
            continue
        parts = match.groupdict()
        month = parts.get("month") or parts.get("zm") or ""
        month_number = _MONTHS[month[:3]] if month.isalpha() else int(month)
        day = int(parts.get("day") or parts.get("zd") or 0)
        if parts.get("year"):
            return _safe_date(int(parts["year"]), month_number, day), blank(s, match)
        return _upcoming(today, month_number, day), blank(s, match)

    match = _NUMERIC_MONTH_DAY.search(s)
    if match is not None:
        a, b = int(match["a"]), int(match["b"])
        month_number, day = (a, b) if a <= 12 else (b, a)  # 28/9 can only be day/month
        if match["year"]:
            year = int(match["year"])
            year += 2000 if year < 100 else 0
            return _safe_date(year, month_number, day), blank(s, match)
        return _upcoming(today, month_number, day), blank(s, match)

    for pattern, unit in _IN_DAYS:
        match = pattern.search(s)
        if match is not None:
            count = int(match["n"]) if match["n"] else 1
            if count > 366:
                continue
            return today + timedelta(days=count * unit), blank(s, match)

    match = _WEEKDAY_NEXT_WEEK.search(s)
    if match is not None:
        weekday = _EN_WEEKDAYS[match["name"] or match["name2"]]
        monday = today - timedelta(days=today.weekday())
        return monday + timedelta(weeks=1, days=weekday), blank(s, match)

    for pattern, offset in _RELATIVE_DAYS:
        match = pattern.search(s)
        if match is not None:
            return today + timedelta(days=offset), blank(s, match)

    match = _ZH_WEEKDAY.search(s)
    if match is not None:
        name = match["name"]
        weekday = int(name) - 1 if name.isdigit() else _ZH_WEEKDAYS[name]
        which = (match["which"] or "").rstrip("个")
        monday = today - timedelta(days=today.weekday())
        if which in ("下", "下下", "上", "上上"):
            weeks = {"下": 1, "下下": 2, "上": -1, "上上": -2}[which]
            return monday + timedelta(weeks=weeks, days=weekday), blank(s, match)
        if which in ("这", "本"):
            return monday + timedelta(days=weekday), blank(s, match)
        return _next_weekday(today, weekday, earliest=1), blank(s, match)

    match = _EN_WEEKDAY.search(s)
    if match is not None:
        weekday = _EN_WEEKDAYS[match["name"]]
        if match["which"] == "last":
            back = (today.weekday() - weekday) % 7 or 7
            return today - timedelta(days=back), blank(s, match)
        if match["which"] == "next":  # "next Friday": the Friday of next week (README)
            monday = today - timedelta(days=today.weekday())
            return monday + timedelta(weeks=1, days=weekday), blank(s, match)
        earliest = 0 if match["which"] == "this" else 1
        return _next_weekday(today, weekday, earliest=earliest), blank(s, match)

    match = _DAY_OF_MONTH.search(s)
    if match is not None:
        day = int(match["day"] or match["zday"])
        for months_ahead in range(12):
            month_index = today.month - 1 + months_ahead
            candidate = _safe_date(today.year + month_index // 12, month_index % 12 + 1, day)
            if candidate is not None and candidate >= today:
                return candidate, blank(s, match)
        return None, blank(s, match)
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


_WEEKEND = (
    (re.compile(r"\b(?:this|the|this\s+coming|coming)\s+weekend\b|这个?周末|本周末"), 0),
    (re.compile(r"\bnext\s+weekend\b|下个?周末"), 1),
)


def extract_weekend(s: str, today: date) -> tuple[tuple[date, date] | None, str]:
    """A weekend named without its day ("next weekend", "这周末"): its Saturday and the Monday
    after. "next weekend" is the weekend of next week, as "next Friday" is next week's
    Friday; on a Sunday "this weekend" is the day itself."""
    for pattern, weeks in _WEEKEND:
        match = pattern.search(s)
        if match is not None:
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=weeks)
            saturday = max(monday + timedelta(days=5), today)
            return (saturday, monday + timedelta(days=7)), blank(s, match)
    return None, s


_WEEK = (
    (re.compile(r"\bthis\s+week\b|这周|本周|这个?星期|这个?礼拜"), 0),
    (re.compile(r"\bnext\s+week\b|下周|下个?星期|下个?礼拜"), 1),
    (re.compile(r"\blast\s+week\b|上周|上个?星期|上个?礼拜"), -1),
)


def extract_week(s: str, today: date) -> tuple[tuple[date, date] | None, str]:
    """A week named without a day ("this week", "下周"): its Monday and the Monday after."""
    for pattern, weeks in _WEEK:
        match = pattern.search(s)
        if match is not None:
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=weeks)
            return (monday, monday + timedelta(days=7)), blank(s, match)
    return None, s
