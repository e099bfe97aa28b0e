"""What people type, as it is kept: one rule for every channel (the screens' forms, the tools'
input models that the JSON API, MCP and the assistant's runs are validated by, the services
behind them).

Every field is NFC and loses its zero-width characters (U+200B-U+200D, U+2060, U+FEFF): they
show nothing, come in with pasted text, and only split or join words where a reader cannot see
it. The controls that change the direction of text (U+202A-U+202E, U+2066-U+2069, U+200E,
U+200F, U+061C) are decided per field (``FIELDS``):

- a meeting title and an approver's reason are shown to other people as a line among others
  (My bookings, the day view, the inbox, the audit log): a direction control there makes them
  read something other than what was typed, so it is refused, in the writer's words, and they
  send it again without it (``UncleanText``);
- a request to the assistant is read for its meaning, which no direction control changes: they
  are taken out, and what is kept (and shown back, and whatever title the assistant reads from
  it) is clean.
"""

from __future__ import annotations

import unicodedata
from enum import StrEnum
from functools import partial
from typing import Annotated, Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext, gettext_noop
from pydantic import AfterValidator

BIDI_CONTROLS = frozenset(
    "\u202a\u202b\u202c\u202d\u202e"  # embeddings, overrides and their end
    "\u2066\u2067\u2068\u2069"  # isolates and their end
    "\u200e\u200f\u061c"  # left-to-right, right-to-left and Arabic letter marks
)
ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")
_ZERO_WIDTH_OUT = dict.fromkeys(map(ord, ZERO_WIDTH))
_BIDI_OUT = dict.fromkeys(map(ord, BIDI_CONTROLS))


class TypedField(StrEnum):
    TITLE = "title"  # a meeting title
    REASON = "reason"  # an approver's reason for a decision
    REQUEST = "request"  # a request to the assistant


# The fields whose direction controls are refused; the others lose them.
FIELDS_REFUSING_BIDI = frozenset({TypedField.TITLE, TypedField.REASON})

BIDI_MESSAGE = gettext_noop(
    "The text contains an invisible character that changes the direction of the text (%(char)s)."
)
BIDI_HINT = gettext_noop("Type it again without that character (paste it as plain text).")


class UncleanText(ValueError):  # noqa: N818 -- a refusal of what was typed, not a fault
    """Typed text holds a direction control where the field refuses them. ``str()`` is the
    English sentence (tool envelopes, pydantic); ``msgid``/``hint``/``params`` say it in the
    reader's language."""

    code = "direction_control"
    msgid = BIDI_MESSAGE
    hint = BIDI_HINT

    def __init__(self, char: str) -> None:
        self.params = {"char": f"U+{ord(char):04X}"}
        super().__init__(f"{BIDI_MESSAGE % self.params} {BIDI_HINT}")

    @property
    def display(self) -> str:
        """The refusal in the active language."""
        return f"{gettext(self.msgid) % self.params} {gettext(self.hint)}"


def typed_text(text: str, field: TypedField) -> str:
    """``text`` as ``field`` keeps it: NFC, without zero-width characters, without direction
    controls (or, for a field that refuses them, raise UncleanText naming the first). Leading
    and trailing spaces are the caller's."""
    text = text.translate(_ZERO_WIDTH_OUT)
    if field in FIELDS_REFUSING_BIDI:
        found = next((c for c in text if c in BIDI_CONTROLS), None)
        if found is not None:
            raise UncleanText(found)
    else:
        text = text.translate(_BIDI_OUT)
    return unicodedata.normalize("NFC", text)


def typed(field: TypedField) -> AfterValidator:
    """The rule as a pydantic validator: ``Annotated[str, typed(TypedField.TITLE)]``."""
    return AfterValidator(partial(typed_text, field=field))


# The tools' input models' types for typed text (their refusal is a pydantic value error).
TitleText = Annotated[str, typed(TypedField.TITLE)]


class TypedTextField(forms.CharField):
    """A form's field of typed text: the same rule, its refusal a ValidationError in the
    reader's language."""

    def __init__(self, *, typed: TypedField, **kwargs: Any) -> None:
        self.typed = typed
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if not isinstance(text, str):  # the field's empty_value
            return text
        try:
            text = typed_text(text, self.typed)
        except UncleanText as exc:
            raise ValidationError(exc.display, code=exc.code) from None
        return text.strip() if self.strip else text
