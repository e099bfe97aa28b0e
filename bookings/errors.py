from __future__ import annotations

from collections.abc import Mapping

from django.utils import translation
from django.utils.translation import gettext


class BookingError(Exception):
    """A refused booking operation. Nothing was written when this is raised.

    ``reason`` is the coarse class the runtime maps to a signal (invalid_input, conflict,
    not_found, forbidden, idempotency_key_reuse); ``code`` names the exact rule.

    ``message`` and ``hint`` are English msgids marked with ``gettext_noop`` whose
    ``%(name)s`` placeholders are filled from ``params``. The attributes ``message`` and ``hint``
    hold the English text (for the model's tool envelope, logs and tests), whatever language is
    active; ``display_message`` and ``display_hint`` translate them into the active language,
    for the screens. A param may be a lazy translation (an equipment label).
    """

    def __init__(
        self,
        reason: str,
        code: str,
        message: str,
        hint: str = "",
        *,
        params: Mapping[str, object] | None = None,
    ) -> None:
        self.reason = reason
        self.code = code
        self.params = dict(params or {})
        self._msgids = (message, hint)
        with translation.override("en"):
            self.message = message % self.params
            self.hint = hint % self.params
        super().__init__(self.message)

    @property
    def display_message(self) -> str:
        return self._translate(self._msgids[0])

    @property
    def display_hint(self) -> str:
        return self._translate(self._msgids[1])

    def _translate(self, msgid: str) -> str:
        # gettext("") would answer the catalogue's header.
        return gettext(msgid) % self.params if msgid else ""

    def as_detail(self) -> dict[str, object]:
        """What a screen needs to show this refusal in its reader's language (JSON-safe)."""
        message, hint = self._msgids
        return {
            "msgid": message,
            "hint_msgid": hint,
            "params": {
                k: v if isinstance(v, int | float | str | bool) or v is None else str(v)
                for k, v in self.params.items()
            },
        }

    @classmethod
    def from_envelope(cls, envelope: dict) -> BookingError:
        """A refusal that came back through the runtime, as the screens show refusals."""
        detail = envelope.get("detail") or {}
        return cls(
            envelope.get("reason") or "invalid_input",
            envelope.get("code") or "refused",
            detail.get("msgid") or envelope.get("message", "").replace("%", "%%"),
            detail.get("hint_msgid") or envelope.get("hint", "").replace("%", "%%"),
            params=detail.get("params") or {},
        )

    def __repr__(self) -> str:
        return f"BookingError({self.reason!r}, {self.code!r}, {self.message!r})"
