"""The words left once every slot of a request is read (job, day, time, people, room or
equipment, which booking): which of them may still name a constraint, and so are asked about,
and which are the ordinary words a request is written in, and so are let through.

A request is not rejected for a word it does not need ("we're discussing the budget"): only a
word that could change what is booked is asked about, never guessed:
- a word in a room's place ("book Everest", "Zeus tomorrow 2-3", "in the atrium") or a person's
  ("for sarah") that is not an ordinary word;
- a word that bends a slot the reader cannot bend ("except", "every", "before", "or");
- a word that looks like a mistyped room name ("bambo");
- a number nothing read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bookings.assistant.parsing.rooms import RoomName, close_to_a_name
from bookings.assistant.parsing.text import FILLER

# Words that change a slot in a way the reader does not read: the request is asked about.
BENDING = frozenset(
    [
        # another room than the one named, or one of several
        "except",
        "excluding",
        "exclude",
        "besides",
        "apart",
        "avoid",
        "either",
        "or",
        # a repeating meeting (the assistant books one at a time; "every Monday": reading.py)
        "recurring",
        "repeating",
        "repeat",
        "biweekly",
        "fortnightly",
        # a time bound that is not a time
        "before",
        "after",
        "latest",
        "earliest",
        "sometime",
        "anytime",
        "whenever",
        "unless",
    ]
)

# Ordinary words a request is written in, beside FILLER: let through even where a room's or a
# person's name could stand ("book something quiet", "for discussing the budget").
_ORDINARY_WORDS = """
    able about above across actual add added adding advance agenda ago agree ahead aim alone
    along already alright although always amazing anybody anyone anything anyway anywhere apply
    appreciate appreciated around arrange arranged ask asked asking assist attend available away
    awesome bad basically because become been being best better bit block blocked book both
    brief briefing bring brought budget business busy buy can cannot cant care case catch
    certain chance chat cheers check checking chill clean clear client close colleague come
    coming comfortable communication company confirm confirmed connect contract cool coordinate
    copy corner could couldn couple course cover coworkers create critical cross current
    customer daily data date deal dear decide decision deep definitely department design desk
    detail details dev development different difficult discuss discussed discussing discussion
    doc document doing done down draft during early easy either else email emergency end
    engineering enough especially even event everyone everything exactly example excellent
    expect expecting external extra fast favor favour feedback few figure final finance find
    fine finish first fix flexible focus folks follow following friday friendly full fun future
    gather gathering give glad going good got great group guess guy guys handle happen happy
    hard help helpful here high hire hiring holiday hope hopefully hurry idea ideally important
    include included info information interested internal interviews into issue issues item
    its join joining keep kind kinda know last later leadership learn least leave legal less
    level light little long look lot lots love low made main maintain make manage management
    managers marketing matter maybe mean means meantime mind minor moment monthly most much
    must name near nearby necessary need needs new nice nobody none normal note notes nothing
    numbers offline often okay once online ones only open operations option options order
    other others otherwise out over own pair part partner party people perfect perhaps person
    personal phone plan planned plans please pleased plus point possible possibly prefer
    preferably preferred prep prepare preparing presentation pretty priority private probably
    problem problems process product progress proper properly proposal prospect purpose put
    quarter quarterly question questions quick quickly quite rather ready real really reason
    recruiting regarding regular related release remote report reporting request required
    requirements research resolve rest results retrospective right roadmap round run running
    sales same save schedule second section security see seems send senior sensitive serious
    service set setting share short should show side simple since single small smaller soon
    sort sorted sorting sound speak special specific spot stakeholder stakeholders start
    started status stay still straight strategy stuff such suitable super support sure sweet
    sync system take talk talking task tasks team teams tech technical thing things think
    though through time tiny together topic topics touch track training transfer trip try
    trying update updates urgent urgently useful usual usually valuable various vendor very via
    video view visit visitor visitors wait walk walkthrough want way well whatever whichever
    while whiteboarding wide will wish within without wonder wondering work working would
    wrap write yeah year yet heya hiya hallo hola greetings folks guys
    over under onto upon cover covering back more less ahead again
    ignore ignoring previous prior instructions instruction rules rule policy policies system
    prompt override bypass skip approval approvals approve approved admin administrator pretend
    act mode developer everybody everyone's anyone's meetings forget
    ugh argh meh oops welp damn dang darn ahh aww whoops yikes
"""
ORDINARY = frozenset(_ORDINARY_WORDS.split())
# Where a room's name stands: after a booking verb or "in"/"at", or before "room".
_ROOM_PLACE = re.compile(
    r"(?:\b(?:book|reserve|grab|get|use|take|in|into)\s+(?:me\s+|us\s+)?(?:the\s+|a\s+|an\s+)?"
    r"(?:room\s+)?|(?:订|预订|预约|要|用|约|在)\s*)$"
)
# Where a person's name stands: "for X" (for whom the booking is).
_PERSON_PLACE = re.compile(r"\bfor\s+$")
_WORD = re.compile(r"[a-z][a-z'-]*")
# A number nothing read: not a floor, a quarter (Q3), an ordinal or a count of rooms.
_NUMBER = re.compile(
    r"(?<![\w:.第])\d+(?![\w:.])(?!\s*(?:个|间|下|次|楼|层|f\b|floor|st\b|nd\b|rd\b|th\b))"
)


def bends(words: str) -> bool:
    """Whether unread ``words`` bend a slot ("except maple", "every monday", "or", "每周")
    rather than name something (a room, a person, a number)."""
    return " " in words.strip() or words in BENDING or not words.isascii()


def _ordinary(word: str) -> bool:
    if word in FILLER or word in ORDINARY:
        return True
    stem = word.rstrip("s")
    if stem in FILLER or stem in ORDINARY:
        return True
    # Words made from other words ("discussing", "ideally", "presentation", "offsite-ish")
    # are not names.
    if re.fullmatch(r"[a-z]{3,}-ish", word):
        return True
    return len(word) > 5 and word.endswith(
        ("ing", "ly", "tion", "sion", "ment", "ness", "ity", "ed", "ize", "ise")
    )


def unread_words(s: str, rooms: Sequence[RoomName], *, chinese: bool = False) -> tuple[str, ...]:
    """The words of ``s`` (the request with every slot read blanked out) that may name a
    constraint the reader did not read, at most three, in order. The first word stands where a
    room's name may ("Everest tomorrow 2-3"); in a Chinese request (``chinese``) every English
    word does, but the ordinary ones."""
    bending: list[str] = []
    left = list(_NUMBER.findall(s))
    start = 0
    first = True
    for match in _WORD.finditer(s):
        word = match.group(0).strip("'-")
        at_start = first and not s[start : match.start()].strip()
        first = False
        if len(word) < 2:
            continue
        before = s[: match.start()]
        if word in BENDING:
            bending.append(word)  # said first: it is what the question is about
            continue
        if word in FILLER or word.rstrip("s") in FILLER:
            continue
        if len(word) >= 4 and not _ordinary(word) and close_to_a_name(word, rooms) is not None:
            left.append(word)  # a room's name mistyped
            continue
        placed = chinese or at_start or _ROOM_PLACE.search(before) or _PERSON_PLACE.search(before)
        if placed and len(word) >= 3 and not _ordinary(word):
            left.append(word)
    return tuple(dict.fromkeys(bending + left))[:3]
