from __future__ import annotations


class BookingError(Exception):
    """A refused booking operation. Nothing was written when this is raised.

    ``reason`` is the coarse class the runtime maps to a signal (invalid_input, conflict,
    not_found, forbidden, idempotency_key_reuse); ``code`` names the exact rule.
    """

    def __init__(self, reason: str, code: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code
        self.message = message
        self.hint = hint

    def __repr__(self) -> str:
        return f"BookingError({self.reason!r}, {self.code!r}, {self.message!r})"
