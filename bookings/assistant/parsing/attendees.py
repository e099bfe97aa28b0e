"""How many people a request is for, and whether it is a booking request at all."""

from __future__ import annotations

import re

from bookings.assistant.parsing.text import blank
from bookings.assistant.parsing.times import PEOPLE, ZH_PEOPLE

# --- attendees ------------------------------------------------------------------------------

_NOT_PEOPLE = r"(?!\s*(?:[:.]\d|[ap]\.?m\b|hours?\b|hrs?\b|h\b|minutes?\b|mins?\b|o'?clock|/|-))"
_ATTENDEE_RANGES = (
    re.compile(
        rf"(?<![\d.])(?P<a>\d+)\s*(?:-|\bto\b|\bor\b|到|至|或)\s*(?P<b>\d+)\s*"
        rf"(?:{PEOPLE}|{ZH_PEOPLE})"
    ),
    re.compile(rf"\bfor\s+(?P<a>\d+)\s*(?:-|\bto\b|\bor\b)\s*(?P<b>\d+)\b{_NOT_PEOPLE}"),
)
_ATTENDEES = (
    re.compile(rf"(?<![\d.])(?P<n>\d+)\s*(?:{PEOPLE}|{ZH_PEOPLE}|of\s+us\b)"),
    re.compile(r"\b(?:team|group|party)\s+of\s+(?P<n>\d+)\b"),
    re.compile(r"(?:人数|参会人数|与会人数)\s*[:为是]?\s*(?P<n>\d+)"),
    re.compile(r"(?:我们|一共|总共|共)\s*(?P<n>\d+)\s*个(?!小时|钟头|半)"),
    re.compile(rf"\bfor\s+(?P<n>\d+)\b{_NOT_PEOPLE}"),
)
_JUST_ME = re.compile(r"\b(?:just|only)\s+(?:me|myself)\b|只有我|就我自己|我自己用")


def extract_attendees(s: str) -> tuple[int | None, str]:
    for pattern in _ATTENDEE_RANGES:
        match = pattern.search(s)
        if match is not None:
            return max(int(match["a"]), int(match["b"])) or None, blank(s, match)
    for pattern in _ATTENDEES:
        match = pattern.search(s)
        if match is not None:
            return int(match["n"]) or None, blank(s, match)
    if _JUST_ME.search(s):
        return 1, s
    return None, s


# --- intent ---------------------------------------------------------------------------------

INTENT = re.compile(
    r"\b(?:book|booking|reserve|reservation|rooms?|meeting|meet|schedule|conference|huddle)\b"
    r"|订|预约|会议|房间|开会|会议室|安排"
)
