"""Normalising request text (full-width forms, Chinese and English number words), and the
room code and equipment it names."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

# --- normalisation --------------------------------------------------------------------------

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
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


def normalize(text: str) -> str:
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


def blank(s: str, match: re.Match[str]) -> str:
    return s[: match.start()] + " " * (match.end() - match.start()) + s[match.end() :]


def search_all(pattern: re.Pattern[str], s: str) -> Iterator[re.Match[str]]:
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


def extract_room_code(s: str) -> tuple[str | None, str]:
    match = _ROOM_CODE.search(s)
    if match is None:
        return None, s
    return match.group(0).upper(), blank(s, match)


def extract_equipment(s: str) -> tuple[str, ...]:
    found = {
        name
        for name, pattern in _EQUIPMENT_PATTERNS.items()
        for match in pattern.finditer(s)
        if not _NEGATED.search(s[max(0, match.start() - 24) : match.start()])
    }
    return tuple(sorted(found))


MAX_ROOMS = 5  # a multi-room request books at most this many rooms (one write each)


def extract_room_codes(s: str) -> tuple[tuple[str, ...], str]:
    """Every room code the text names ("R7 and R9", "R7 和 R9"), in order, without repeats,
    all blanked out of the text."""
    codes: list[str] = []
    for match in _ROOM_CODE.finditer(s):
        code = match.group(0).upper()
        if code not in codes:
            codes.append(code)
        s = blank(s, match)
    return tuple(codes[:MAX_ROOMS]), s
