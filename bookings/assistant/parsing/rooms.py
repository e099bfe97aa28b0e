"""The rooms a request names: by code ("R7", "7号会议室", "room 7") and by name ("Maple",
"pine room", "LOTUS", "订Maple"), and names that match no room ("the Atlantis room",
"星河会议室"), with the nearest real names. Matched on normalized text (NFKC, lower case), so
case, spacing and full width do not matter."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bookings.assistant.parsing.text import FILLER, blank


@dataclass(frozen=True)
class RoomName:
    """A room as the parser knows it: code, display name, whether it can be booked."""

    code: str
    name: str
    bookable: bool = True


@dataclass(frozen=True)
class RoomsFound:
    codes: tuple[str, ...]  # every room named, in order, without repeats
    unknown: tuple[str, ...]  # names that match no room, as written (lower case)
    rest: str  # the text with the rooms blanked out
    # A room named to be avoided ("not Maple", "anything but R7", "除了maple"), as written:
    # the reader does not book around it, it asks.
    negated: tuple[str, ...] = ()


_NEGATION = re.compile(
    r"(?:\b(?:not|no|but|except|excluding|besides|avoid|without)|\bother\s+than|"
    r"\bapart\s+from|\binstead\s+of|\brather\s+than|不要|不用|除了|别|不是|不想要|不想用|除)"
    r"\s*(?:the\s+|in\s+)?$"
)


_CODE = re.compile(r"(?<![a-z0-9])r(?P<n>\d{1,4})(?![a-z0-9])")
_ZH_CODE = re.compile(r"(?<![\d.:])(?P<n>\d{1,4})\s*号\s*(?:会议室|房间|房|室|厅)")
_EN_ROOM_NUMBER = re.compile(
    r"\broom\s*(?:no\.?|number|#)?\s*(?P<n>\d{1,4})\b"
    r"(?!\s*(?:[-:.~]|to\b|till\b|until\b|[ap]\.?m\b|o'?clock|点|时|people|ppl|persons?|pax|"
    r"guests?|人|位|个))"
)
# Words that come before "room" / "会议室" without naming one.
_GENERIC = frozenset(
    [
        "a",
        "an",
        "the",
        "any",
        "some",
        "one",
        "my",
        "our",
        "this",
        "that",
        "big",
        "bigger",
        "large",
        "larger",
        "small",
        "smaller",
        "quiet",
        "meeting",
        "conference",
        "free",
        "empty",
        "available",
        "open",
        "booked",
        "same",
        "other",
        "another",
        "second",
        "new",
        "nice",
        "good",
        "quick",
        "huddle",
        "private",
        "phone",
        "video",
        "call",
        "team",
        "board",
        "boardroom",
        "cheap",
        "little",
        "bookable",
        "usual",
        "normal",
        "regular",
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
        "8",
        "9",
        "10",
        "which",
        "what",
        "whose",
        "your",
    ]
)
_DAY_WORDS = frozenset(
    [
        "today",
        "tomorrow",
        "tonight",
        "yesterday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "mon",
        "tue",
        "wed",
        "thu",
        "fri",
        "sat",
        "sun",
        "tmrw",
        "tmr",
    ]
)
_EN_UNKNOWN = (
    re.compile(r"\b(?:the\s+)?(?P<name>[a-z][a-z'-]{2,})\s+(?:meeting\s+)?room\b"),
    re.compile(r"\broom\s+(?:called|named)\s+(?P<name>[a-z][a-z'-]{1,})\b"),
    re.compile(r"\b(?:book|reserve|get|need|want)\s+room\s+(?P<name>[a-z][a-z'-]{2,})\b"),
)
_ZH_GENERIC = re.compile(
    r"^(?:.*[订约要用个间的大小空哪些这那我你他们帮给看查问有没能吗一两什啥\d].*|会议|开会|视频|电话|培训|多功能|临时|普通|独立"
    r"|任何|其他|其它|别的)$"
)
_ZH_UNKNOWN = re.compile(r"(?P<name>[\u4e00-\u9fff]{2,6})(?:会议室|厅)")


def find_rooms(s: str, rooms: Sequence[RoomName]) -> RoomsFound:
    """Find every room ``s`` names by code or name; unknown names are those written like a
    room's name ("X room", "X会议室", "X厅") that match none."""
    codes: list[str] = []
    known_codes = {r.code for r in rooms}

    def add(code: str) -> None:
        if code not in codes:
            codes.append(code)

    negated: list[str] = []

    def named(match: re.Match[str], code: str) -> None:
        nonlocal s
        negation = _NEGATION.search(s[max(0, match.start() - 16) : match.start()])
        if negation is not None:
            before = max(0, match.start() - 16)
            negated.append(" ".join(s[before + negation.start() : match.end()].split()))
        else:
            add(code)
        s = blank(s, match)

    for pattern in (_CODE, _ZH_CODE):
        for match in pattern.finditer(s):
            named(match, f"R{int(match['n'])}")
    for match in _EN_ROOM_NUMBER.finditer(s):
        code = f"R{int(match['n'])}"
        if code in known_codes:
            named(match, code)
    for room in sorted(rooms, key=lambda r: -len(r.name)):
        room_pattern = name_pattern(room.name)
        if room_pattern is None:
            continue
        for match in room_pattern.finditer(s):
            named(match, room.code)
    unknown: list[str] = []
    for pattern in _EN_UNKNOWN:
        for match in pattern.finditer(s):
            name = match["name"]
            if name.removesuffix("'s") in _DAY_WORDS:
                continue  # "tomorrow's meeting room": a booking's day, not a room's name
            if name not in _GENERIC and name not in FILLER and name not in unknown:
                unknown.append(name)
                s = blank(s, match)
    for match in _ZH_UNKNOWN.finditer(s):
        name = _zh_name(match["name"])
        if name and name not in unknown:
            unknown.append(name)
            s = blank(s, match)
    return RoomsFound(tuple(codes), tuple(unknown), s, tuple(negated))


def _zh_name(run: str) -> str | None:
    """The longest tail of ``run`` that reads as a name ("要用星河" -> "星河"), if any."""
    for start in range(len(run) - 1):
        tail = run[start:]
        if len(tail) <= 4 and not _ZH_GENERIC.match(tail):
            return tail
    return None


def fold(name: str) -> str:
    return re.sub(r"\s+", "", name.lower())


def name_pattern(name: str) -> re.Pattern[str] | None:
    """A room's name as a pattern: any spacing between its letters' words, not inside a longer
    English word ("pine" is not in "spine"), anywhere in Chinese text ("订maple会议室")."""
    words = re.findall(r"\w+", name.lower())
    if not words or (len(words) == 1 and len(words[0]) < 3):
        return None
    body = r"\s*".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![a-z0-9]){body}(?:\s*(?:room|会议室|房间|室))?(?![a-z0-9])")


def nearest_names(word: str, rooms: Sequence[RoomName], *, limit: int = 3) -> list[RoomName]:
    """The bookable rooms whose names are closest to ``word`` (best first); when none is close,
    the bookable rooms' names alphabetically (at most ``limit``)."""
    bookable = [r for r in rooms if r.bookable]
    by_name = {fold(r.name): r for r in bookable}
    close = difflib.get_close_matches(fold(word), list(by_name), n=limit, cutoff=0.6)
    return [by_name[n] for n in close]


def transposed_name(word: str, rooms: Sequence[RoomName]) -> RoomName | None:
    """The one room whose name ``word`` is with two neighbouring letters swapped ("mapel" ->
    Maple): a slip of the fingers with one reading, taken as that room. Any other typo, or one
    that could be two rooms, is asked about."""
    typed = fold(word)
    found = [
        room
        for room in rooms
        if len(fold(room.name)) == len(typed) >= 4 and _one_swap(typed, fold(room.name))
    ]
    return found[0] if len(found) == 1 else None


def _one_swap(a: str, b: str) -> bool:
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    return (
        len(diff) == 2
        and diff[1] == diff[0] + 1
        and a[diff[0]] == b[diff[1]]
        and a[diff[1]] == b[diff[0]]
    )


def close_to_a_name(word: str, rooms: Sequence[RoomName]) -> RoomName | None:
    """A room whose name ``word`` is probably a typo of ("bambo", "lotsu")."""
    found = nearest_names(word, rooms, limit=1)
    if found and difflib.SequenceMatcher(None, fold(word), fold(found[0].name)).ratio() >= 0.75:
        return found[0]
    return None
