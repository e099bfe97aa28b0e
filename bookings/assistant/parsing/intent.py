"""What a request asks for besides a room: something the assistant does not do (cancel, change),
a booking for another person, or a room in addition to one already held."""

from __future__ import annotations

import re

# Matched on normalized text (lower case, Chinese number words as digits).
# "cancel" is a verb whatever follows; "change", "move" and the like only with what they act on
# ("the change review meeting" is a booking request).
_CANCEL = re.compile(
    r"\b(?:cancel|call\s+off|unbook)\b(?!\s+(?:if|unless|when)\b)"
    r"|\b(?:delete|remove|reschedule|postpone|move|change|shift)\s+(?:all\s+)?"
    r"(?:my|our|the|this|that|these|those|it|them|all|every)\b"
    r"|取消|退订|撤销|删除|删掉|改期|推迟|改到|换到"
)
# "for e23", "on behalf of A01", "给e23订", "帮 e23 订", "替e23": an employee id after the
# words that name whom a booking is for ("帮我订" is the asker, no id).
_BENEFICIARY = re.compile(
    r"(?:\bfor|\bon\s+behalf\s+of|给|帮|替|为|代)\s*(?P<who>[ea]\d{1,6})(?![a-z0-9])"
)
_ANOTHER_ROOM = re.compile(
    r"\b(?:another|an?\s+(?:additional|extra|second|2nd)|1\s+more)\s+(?:meeting\s+)?room\b"
    r"|再\s*(?:订|约|预订|预约|要|开)\s*1?\s*[间个]|另外?\s*(?:再\s*)?(?:订|约|预订|预约)"
    r"|另\s*1\s*间|第\s*2\s*间|额外|多订|加订"
)


def wants_cancel_or_change(s: str) -> bool:
    return _CANCEL.search(s) is not None


def named_beneficiary(s: str) -> str | None:
    """The employee id a booking is asked for, upper case."""
    match = _BENEFICIARY.search(s)
    return match["who"].upper() if match is not None else None


def wants_another_room(s: str) -> bool:
    return _ANOTHER_ROOM.search(s) is not None
