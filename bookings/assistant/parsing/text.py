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
_NOT_A_NUMBER = re.compile(r"(?<![周期拜])一(?=共|下|起|样|直|定|般|些|切)|(?<=同)一(?=[时个天间])")
_PRONOUN_ONE = re.compile(
    r"\b(first|second|third|fourth|fifth|last|that|this|which|another|any|the|a|big|small|"
    r"bigger|smaller|other|same|next|cheaper|free|empty|quiet|new|good|nice|"
    r"(?:\d{1,2}(?::\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.|o'?clock))|morning|afternoon|evening|"
    r"today'?s|tomorrow'?s|maple|pine|early|late|earlier|later|long|short)\s+one\b"
)
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


_LETTERS_BY_CJK = re.compile(r"(?<=[a-z])(?=[\u3400-\u9fff])|(?<=[\u3400-\u9fff])(?=[a-z])")
# Common typos and shorthands of hurried typing, read as the word meant.
_TYPOS = (
    (
        re.compile(
            r"\b(?:tomm?or+ow|tomm?or+w|tmor+ow|tomrr?ow|2mor+ow|2moro|tomoro|tmrow|tomorow"
            r"|tmrw|tmr|tmw|tmrrw)\b"
        ),
        "tomorrow",
    ),
    (re.compile(r"\b(?:thr?u(?:r?s)?da?y|thursdy|thurdsay|thrusday|thurday)\b"), "thursday"),
    (
        re.compile(r"\b(?:wend?e?s?day|wedn?e?sday|wensday|wednsday|wedensday|wendsday)\b"),
        "wednesday",
    ),
    (re.compile(r"\b(?:tuseday|tueday|tusday|teusday)\b"), "tuesday"),
    (re.compile(r"\b(?:firday|fridy|frday|friady)\b"), "friday"),
    (re.compile(r"\b(?:mondy|monady|mnday)\b"), "monday"),
    (re.compile(r"\b(?:satuday|saterday|satruday)\b"), "saturday"),
    (re.compile(r"\b(?:todya|tday|tdy)\b"), "today"),
    (re.compile(r"\b(?:peple|poeple|ppl|ppls|peeps|pple)\b"), "people"),
    (re.compile(r"\b(?:projecter|projektor|proyector|beamer|beamers)\b"), "projector"),
    (re.compile(r"\b(?:whitebaord|whitebord|white-board)\b"), "whiteboard"),
    (re.compile(r"\b(?:roon|rooom|rom)\b"), "room"),
    (re.compile(r"\b(?:bok|boook|bkoo|bookin|boking|bookng)\b"), "book"),
    (re.compile(r"\bafternoo?n?\b|\baftenoon\b|\barvo\b"), "afternoon"),
    (re.compile(r"\bmornin\b|\bmorining\b"), "morning"),
    (re.compile(r"\bavail(?:able|ible|abel|alble)?\b"), "available"),
    (re.compile(r"(?<![\w'])'?til'?(?![\w'])"), "till"),
    # "me n 1 other", "pine n maple": "n" alone is "and".
    (re.compile(r"(?<=[a-z0-9] )n(?= [a-z0-9])"), "and"),
    # "10:00道10:45", "3点倒4点": a mistyped 到 between two times.
    (re.compile(r"(?<=[\d点分半])\s*[道倒导]\s*(?=\d|[一二两三四五六七八九十])"), "到"),
)
# "half past two" -> 2:30; "quarter past 3" -> 3:15; "quarter to 4" -> 3:45; "3.30" -> 3:30.
_HALF_PAST = re.compile(r"\bhalf\s+past\s+(?P<h>\d{1,2})\b")
_QUARTER_PAST = re.compile(r"\b(?:a\s+)?quarter\s+past\s+(?P<h>\d{1,2})\b")
_QUARTER_TO = re.compile(r"\b(?:a\s+)?quarter\s+(?:to|till?)\s+(?P<h>\d{1,2})\b")
_DOT_TIME = re.compile(r"(?<![\d.])(?P<h>\d{1,2})\.(?P<m>[0-5]\d)(?![\d.])")


# "half 3" (British: 3:30), "10 past 3", "20 after 2": minutes past the hour.
_HALF_HOUR = re.compile(
    r"\bhalf\s+(?P<h>\d{1,2})\b(?!\s*(?:hours?|hrs?|h\b|people|ppl|persons?|of\b|:|\.\d))"
)
_MINUTES_PAST = re.compile(r"\b(?P<m>[1-5]?\d)\s+(?:past|after)\s+(?P<h>\d{1,2})\b(?!\s*:)")
# "3p", "10a", "2p-3p": am/pm written as one letter.
_ONE_LETTER = re.compile(r"(?<![\w:.])(?P<t>\d{1,2}(?::[0-5]\d)?)(?P<ap>[ap])(?![a-z0-9'])")
# "15h", "15h30", "9h-10h": the hour written with h (a bare "2h" stays a duration).
_H_CLOCK = re.compile(r"(?<![\w.:])(?P<h>\d{1,2})h(?P<m>[0-5]\d)?(?![a-z0-9])")
_AT_BEFORE = re.compile(r"(?:\b(?:at|from|to|till|until|by|between|and)|-)\s*$")
# "1500", "0930-1030": the 24-hour clock without a colon, where it stands as a time.
_FOUR_DIGITS = re.compile(r"(?<![\d/:.])(?P<h>[01]\d|2[0-3])(?P<m>[0-5]\d)(?![\d/:.])")
_FOUR_DIGITS_AFTER = re.compile(
    r"^\s*(?:-|to\b|till\b|until\b)\s*(?:[01]\d|2[0-3])[0-5]\d(?!\d)|^\s*(?:hrs|hours|h)\b"
)
# "around 3", "about 2:30", "3ish": an approximate start is read as that start.
_APPROX = re.compile(
    r"(?<!\bfor\s)\b(?:around|about|approx\.?|approximately|roughly|circa|ca\.)\s*"
    r"(?=\d{1,2}(?::[0-5]\d)?\s*(?:[ap]m\b|o'?clock|ish\b)?(?![\d:]|\s*(?:people|ppl|"
    r"persons?|pax|of\s+us|guests|attendees|colleagues|hours?|hrs?|h\b|mins?|minutes?|-|to\b)))"
)
_ISH = re.compile(r"\b(?P<t>\d{1,2}(?::[0-5]\d)?(?:\s*[ap]m)?)\s*-?ish\b")
# "x5", "*5" (or with the multiplication sign): a head count written as a product.
_TIMES_COUNT = re.compile(r"(?<![\w])[x\u00d7*]\s?(?P<n>\d{1,2})\b(?!\s*(?:[ap]m\b|:|h\b))")


def _h_clock(s: str) -> str:
    def one(m: re.Match[str]) -> str:
        hour = int(m["h"])
        before, after = s[: m.start()], s[m.end() :]
        ranged = re.match(r"\s*-\s*\d{1,2}h\b", after) or re.search(r"\d{1,2}h\s*-\s*$", before)
        if hour > 23:
            return m.group(0)
        if m["m"] or hour >= 13 or ranged or _AT_BEFORE.search(before):
            return f"{hour}:{m['m'] or '00'}"
        return m.group(0)

    return _H_CLOCK.sub(one, s)


def _four_digits(s: str) -> str:
    def one(m: re.Match[str]) -> str:
        before, after = s[: m.start()], s[m.end() :]
        if _AT_BEFORE.search(before) or _FOUR_DIGITS_AFTER.match(after):
            return f"{m['h']}:{m['m']}"
        return m.group(0)

    return _FOUR_DIGITS.sub(one, s)


def _clock_words(s: str) -> str:
    s = _HALF_PAST.sub(lambda m: f"{m['h']}:30", s)
    s = _QUARTER_PAST.sub(lambda m: f"{m['h']}:15", s)
    s = _QUARTER_TO.sub(lambda m: f"{(int(m['h']) - 2) % 12 + 1}:45", s)
    s = _HALF_HOUR.sub(lambda m: f"{m['h']}:30", s)
    s = _MINUTES_PAST.sub(lambda m: f"{m['h']}:{int(m['m']):02d}", s)
    s = _DOT_TIME.sub(lambda m: f"{m['h']}:{m['m']}", s)
    s = _ONE_LETTER.sub(lambda m: f"{m['t']}{m['ap']}m", s)
    s = _h_clock(s)
    s = _four_digits(s)
    s = _ISH.sub(lambda m: f"at {m['t']}", s)
    s = _APPROX.sub("at ", s)
    return _TIMES_COUNT.sub(lambda m: f" {m['n']} people", s)


# "and one on Friday too", "book one for 3": one booking, not the number 1.
_ONE_BOOKING = re.compile(
    r"\b(and|book|get|grab|need|want|reserve|also|me)\s+one\b"
    r"(?!\s*(?:people|persons?|ppl|pax|of\b|hours?|hrs?|h\b|more|other|[:.]?\d|pm|am|o'?clock))"
)


def normalize(text: str) -> str:
    """Fold width, case, dashes and number words so that later patterns see ASCII digits."""
    s = unicodedata.normalize("NFKC", text).lower()
    s = _DASHES.sub("-", s)
    s = _LETTERS_BY_CJK.sub(" ", s)  # "订maple会议室": English words apart from Chinese ones
    for pattern, word in _TYPOS:
        s = pattern.sub(word, s)
    s = _GREETING.sub(" ", s)
    s = _NOT_ONE_OCLOCK.sub(r"\1一些", s)
    s = _NOT_A_NUMBER.sub(lambda m: m.group(0)[1:], s)  # "一共", "一下": not the number 1
    s = _PRONOUN_ONE.sub(r"\1", s)  # "the second one", "that one": not the number 1
    s = _ONE_BOOKING.sub(r"\1", s)
    s = _CN_NUMBER.sub(_cn_number_to_digits, s)
    s = _EN_NUMBER.sub(lambda m: _EN_NUMBERS[m.group(1)], s)
    s = _clock_words(s)
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


# Words a hurried request is made of besides its constraints: anything else in English is a
# word the assistant did not understand, and it asks rather than drop it.
FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "for",
        "to",
        "at",
        "on",
        "in",
        "from",
        "till",
        "until",
        "by",
        "with",
        "and",
        "or",
        "but",
        "so",
        "if",
        "it",
        "its",
        "it's",
        "is",
        "are",
        "am",
        "be",
        "i",
        "me",
        "my",
        "we",
        "us",
        "our",
        "you",
        "your",
        "please",
        "pls",
        "plz",
        "can",
        "could",
        "would",
        "will",
        "shall",
        "should",
        "may",
        "might",
        "need",
        "want",
        "wanna",
        "gonna",
        "like",
        "get",
        "grab",
        "have",
        "has",
        "got",
        "book",
        "booking",
        "booked",
        "reserve",
        "reservation",
        "room",
        "rooms",
        "meeting",
        "meetings",
        "meet",
        "conference",
        "call",
        "calls",
        "huddle",
        "sync",
        "chat",
        "session",
        "discussion",
        "schedule",
        "slot",
        "space",
        "place",
        "one",
        "some",
        "any",
        "thanks",
        "thank",
        "thx",
        "ty",
        "hi",
        "hello",
        "hey",
        "morning",
        "afternoon",
        "evening",
        "tonight",
        "night",
        "noon",
        "pm",
        "am",
        "hour",
        "hours",
        "hr",
        "hrs",
        "min",
        "mins",
        "minutes",
        "minute",
        "just",
        "only",
        "also",
        "too",
        "quick",
        "quickly",
        "asap",
        "urgent",
        "small",
        "big",
        "large",
        "quiet",
        "free",
        "available",
        "there",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "when",
        "where",
        "who",
        "how",
        "about",
        "around",
        "approx",
        "approximately",
        "roughly",
        "people",
        "person",
        "persons",
        "ppl",
        "pax",
        "attendees",
        "guests",
        "participants",
        "colleagues",
        "colleague",
        "team",
        "members",
        "heads",
        "of",
        "us",
        "them",
        "they",
        "do",
        "does",
        "did",
        "done",
        "make",
        "made",
        "let",
        "lets",
        "let's",
        "see",
        "check",
        "show",
        "list",
        "tell",
        "know",
        "find",
        "look",
        "want",
        "else",
        "another",
        "more",
        "extra",
        "second",
        "additional",
        "time",
        "times",
        "day",
        "days",
        "today",
        "tomorrow",
        "next",
        "week",
        "weeks",
        "this",
        "coming",
        "o'clock",
        "oclock",
        "clock",
        "half",
        "quarter",
        "past",
        "between",
        "through",
        "thru",
        "up",
        "yes",
        "no",
        "ok",
        "okay",
        "sure",
        "right",
        "now",
        "then",
        "again",
        "same",
        "still",
        "sorry",
        "actually",
        "instead",
        "rather",
        "change",
        "not",
        "don't",
        "dont",
        "any",
        "anything",
        "something",
        "somewhere",
        "near",
        "nearby",
        "go",
        "ahead",
        "mine",
        "own",
        "myself",
        "each",
        "all",
        "both",
        "every",
        "please?",
        "standup",
        "stand-up",
        "interview",
        "review",
        "planning",
        "demo",
        "retro",
        "workshop",
        "training",
        "lunch",
        "kickoff",
        "kick-off",
        "1:1",
        "one-on-one",
        "brainstorm",
        "presentation",
        "offsite",
        "onsite",
        "catchup",
        "catch-up",
        "catch",
        "sync-up",
        "weekly",
        "daily",
        "monthly",
        "client",
        "customer",
        "project",
        "sprint",
        "board",
        "lol",
        "hmm",
        "um",
        "uh",
        "okey",
        "kindly",
        "dear",
        "would'd",
        "i'd",
        "i'm",
        "im",
        "we're",
        "were",
        "need",
        "needed",
        "needs",
        "want",
        "wants",
        "wanted",
        "looking",
        "set",
        "setup",
        "arrange",
        "organise",
        "organize",
        "host",
        "hold",
        "having",
        "use",
        "using",
        "used",
        "seats",
        "seat",
        "fits",
        "fit",
        "capacity",
        "cancel",
        "cancelled",
        "move",
        "push",
        "pull",
        "back",
        "forward",
        "earlier",
        "later",
        "early",
        "late",
        "office",
        "floor",
        "building",
        "workday",
        "work",
        "whole",
        "entire",
        "projector",
        "projectors",
        "projection",
        "screen",
        "screens",
        "display",
        "displays",
        "monitor",
        "monitors",
        "tv",
        "tvs",
        "video",
        "phone",
        "phones",
        "telephone",
        "whiteboard",
        "whiteboards",
        "vc",
        "zoom",
        "webcam",
        "camera",
        "flip",
        "chart",
        "speakerphone",
        "polycom",
        "equipment",
        "equipped",
        "called",
        "named",
        "has",
        "having",
        "big-screen",
    ]
) | frozenset(
    [
        "drop",
        "scrap",
        "delete",
        "remove",
        "release",
        "kill",
        "few",
        "several",
        "bunch",
        "handful",
        "lots",
        "many",
        "couple",
        "whole",
        "sync-up",
        "standups",
        "syncs",
        "chats",
        "calls",
        "meetings",
        "bookings",
        "reservations",
        "moro",
        "anyone",
        "people's",
        "free-up",
        "upcoming",
        "coming",
        "reserved",
        "show",
        "list",
        "what's",
        "whats",
        "which's",
        "booked",
        "scheduled",
        "tmr",
        "tmrw",
        "tmw",
        "tom",
        "nxt",
        "wk",
        "mins",
        "hrs",
        "hr",
        "ppl",
        "pax",
        "rm",
        "mtg",
        "mtgs",
        "conf",
        "u",
        "ur",
        "thx",
        "pls",
        "plz",
    ]
)

# --- room and equipment ---------------------------------------------------------------------

_ROOM_CODE = re.compile(r"(?<![a-z0-9])r\d+(?![a-z0-9])")

_EQUIPMENT_PATTERNS = {
    "display": re.compile(
        r"\b(?:screens?|displays?|monitors?|tvs?|big\s+screen|flat\s*screen)\b"
        r"|显示屏|显示器|大屏|屏幕|电视|投屏"
    ),
    "phone": re.compile(
        r"\b(?:tele|speaker|conference\s*)?phones?\b|\bspeakerphone\b|\bpolycom\b|电话|座机"
    ),
    "projector": re.compile(r"\bproject(?:or|ors|ion)\b|投影"),
    "video": re.compile(
        r"\bvideo|\bvc\b|\bzoom\b|\bteams\s+call\b|\bwebcam\b|\bcamera\b|视频|摄像头|网络会议"
    ),
    "whiteboard": re.compile(r"\bwhite\s*boards?\b|\bflip\s*chart\b|白板"),
}
# Things people ask a room to have that no room record lists: asked about, never dropped.
UNSUPPORTED_EQUIPMENT = re.compile(
    r"\b(?:coffee(?:\s+machine)?|sofas?|couch|standing\s+desks?|microphones?|mics?|"
    r"speakers|sound\s+system|printer|kitchen|window|windows|wheelchair|accessible|"
    r"hdmi|adapter|charger|air\s*con|aircon|a/?c|piano|stage|podium|lectern|dimmable|"
    r"blackout|catering|snacks|water|tea)\b"
    r"|麦克风|话筒|音响|咖啡|沙发|打印机|窗户|靠窗|空调|茶水|茶歇|无障碍|讲台|站立|充电"
)
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


def unsupported_equipment(s: str) -> tuple[str, ...]:
    """Things asked for that no room record lists ("a coffee machine", "麦克风"), unless negated."""
    found = [
        match.group(0).strip()
        for match in UNSUPPORTED_EQUIPMENT.finditer(s)
        if not _NEGATED.search(s[max(0, match.start() - 24) : match.start()])
    ]
    return tuple(dict.fromkeys(found))
