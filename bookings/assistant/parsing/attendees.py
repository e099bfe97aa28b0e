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
    re.compile(r"(?<![\d.:-])(?P<n>\d+)-(?:person|people|seat|seater)\b"),  # "a 4-person review"
    re.compile(
        r"\b(?:team|group|party|workshop|meeting|session|call|sync|training|class|panel|"
        r"interview|review|demo|lunch|offsite)\s+(?:of|for)\s+(?P<n>\d+)\b"
        r"(?!\s*(?:[:.]\d|[ap]\.?m\b|hours?\b|hrs?\b|h\b|minutes?\b|mins?\b|o'?clock|-|to\b))"
    ),
    re.compile(r"(?:人数|参会人数|与会人数)\s*[:为是]?\s*(?P<n>\d+)"),
    # "we'll be 8", "we're 7", "headcount 8", "attendees: 5": the count after the words that
    # announce it.
    re.compile(
        r"\b(?:we(?:'ll|\s+will)?\s+be|we\s+are|we're|head\s*-?\s*count|attendees|pax|"
        rf"people|participants|size)\s*(?:is\s+|of\s+)?[:=]?\s*(?P<n>\d+)\b{_NOT_PEOPLE}"
    ),
    re.compile(r"(?:我们|一共|总共|共)\s*(?P<n>\d+)\s*个(?!小时|钟头|半)"),
    re.compile(rf"\bfor\s+(?P<n>\d+)\b{_NOT_PEOPLE}"),
)
_OTHERS = (
    r"(?:colleagues?|co-?workers?|others?|people|persons?|teammates?|team\s*mates?|friends?|"
    r"guests?|more|visitors?|clients?|customers?|engineers?|devs?|interns?|folks|guys)"
)
_ROLE = (
    r"(?:my\s+|the\s+|a\s+|our\s+)?(?:manager|boss|colleague|co-?worker|lead|teammate|friend|"
    r"intern|client|customer|partner|supervisor|director|candidate|interviewer|mentor|mentee|"
    r"report|designer|pm|cto|ceo|vp|hr)"
)
_ZH_OTHERS = (
    r"(?:个|位|名)?(?:同事|人|朋友|客户|伙伴|实习生|同学|新人|候选人|访客|领导|位同事|位客户|位)"
)
_ZH_ROLE = r"(?:我的)?(?:领导|老板|经理|同事|主管|客户|导师|组长|上司|总监|hr)"
# Counting phrases, read before times ("1-1" is a meeting of two, not a time).
_COUNTING: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(rf"\b(?:me|myself|i)\s*(?:and|\+|plus|with|&)\s*(?P<n>\d+)\s*{_OTHERS}?"), 1),
    (re.compile(rf"(?<![\d:])(?P<n>\d+)\s*{_OTHERS}\s*(?:and|\+|plus|&)\s*(?:me|myself|i)\b"), 1),
    # "me and another colleague", "me plus one other person": the asker and one more.
    (
        re.compile(
            r"\b(?:me|myself|i)\s*(?:and|\+|plus|&|with)\s*(?:another|1\s+other|an\s+other|"
            r"a\s+second)\b(?:\s+(?:colleague|co-?worker|person|teammate|team\s*mate|guest|"
            r"visitor|one|friend|engineer|dev|intern))?"
        ),
        2,
    ),
    (re.compile(rf"\b(?:me|myself|i)\s*(?:and|\+|&|with)\s*{_ROLE}\b"), 2),
    (re.compile(r"\b(?:me|myself|i)\s*(?:and|\+|&)\s*(?:her|him)\b"), 2),
    (re.compile(rf"\b{_ROLE}\s*(?:and|\+|&)\s*(?:me|myself|i)\b"), 2),
    (
        re.compile(r"(?<![\d:/.-])1\s*(?::|-|on|v|对)\s*1(?![\d:/.-])|\bone\s+on\s+one\b|\b1on1\b"),
        2,
    ),
    (re.compile(r"\bhalf\s+a\s+dozen\b"), 6),
    (re.compile(r"\ba\s+dozen\b"), 12),
    (re.compile(r"\b(?:a\s+)?couple\s+(?:of\s+)?(?:people|persons|us|colleagues|guests)\b"), 2),
    (re.compile(r"\b(?:the\s+)?(?:2|two)\s+of\s+us\b"), 2),
    (re.compile(rf"我\s*(?:和|跟|与|加|带)\s*(?P<n>\d+)\s*{_ZH_OTHERS}"), 1),
    (re.compile(r"我\s*\+\s*(?P<n>\d+)(?![\d:点.])"), 1),  # "我+2"
    # "我和另一个同事", "我跟另外两位同事": the asker and the others named.
    (re.compile(rf"我\s*(?:和|跟|与|加|带)\s*另(?:外)?\s*(?P<n>\d+)\s*{_ZH_OTHERS}"), 1),
    (re.compile(rf"(?P<n>\d+)\s*{_ZH_OTHERS}\s*(?:和|跟|加|加上)\s*我(?!们)"), 1),
    (re.compile(rf"我\s*(?:和|跟|与|加)\s*{_ZH_ROLE}"), 2),
    (re.compile(r"[我咱]们?俩|俩\s*(?:个)?人|两人|2人间"), 2),
    (re.compile(r"[我咱]们?仨|仨\s*(?:个)?人"), 3),
)
# "五六个人", "三四个人": a range written as two digits (kept as Chinese by normalize).
_ZH_DIGIT = "一二三四五六七八九"
_ZH_RANGE = re.compile(rf"(?P<a>[{_ZH_DIGIT}])(?P<b>[{_ZH_DIGIT}])\s*(?:个人|个同事|个|人|位|名)")
# Vague head counts: the assistant asks rather than guessing.
VAGUE = re.compile(
    r"\b(?:a\s+few|few|some|several|a\s+bunch\s+of|many|lots\s+of|a\s+lot\s+of|a\s+handful\s+of|the\s+whole)\s+"
    r"(?:people|colleagues|of\s+us|guests|folks|persons|team|teammates)\b"
    r"|\bmy\s+(?:team|department|group|squad)\b|几个人|几个同事|几位|一些人|好几个|整个(?:团队|部门|组)|全组|全部门|我们组|我们团队|一两个"
)


def extract_counting(s: str) -> tuple[int | None, bool, str]:
    """A head count written as a phrase ("me and 3 colleagues" = 4, "1:1" = 2, "五六个人" = 6):
    the number, whether it is the upper end of a range, and the text with it blanked."""
    match = _ZH_RANGE.search(s)
    if match is not None:
        a, b = (_ZH_DIGIT.index(match[g]) + 1 for g in ("a", "b"))
        if b == a + 1:
            return b, True, blank(s, match)
    for pattern, value in _COUNTING:
        match = pattern.search(s)
        if match is not None:
            n = int(match["n"]) + 1 if "n" in pattern.groupindex else value
            return n, False, blank(s, match)
    return None, False, s


_JUST_ME = re.compile(
    r"\b(?:just|only)\s+(?:me|myself)\b|\bsolo\b|\b(?:by\s+)?myself\b|\balone\b"
    r"|只有我(?![们和跟与])|就我(?:自己|\s*1\s*个\s*人?|\s*1\s*人)|我自己用|我\s*1\s*个\s*人"
)


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
