"""The sign-in forms of the site and of the admin, throttled (accounts.throttle): a locked
account or address is refused before its password is hashed, and hashing waits for one of the
process's few hashing slots."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.utils.translation import gettext, ngettext

from accounts import throttle
from accounts.services import login_lockout_record

BUSY_RETRY_AFTER_S = 5

# The mixin is only ever mixed into an AuthenticationForm; mypy checks it as one.
if TYPE_CHECKING:
    _LoginFormBase = AuthenticationForm
else:
    _LoginFormBase = object


class ThrottledLogin(_LoginFormBase):
    """Mixed into an AuthenticationForm. After ``is_valid()`` is False, ``retry_after_s`` and
    ``status`` say whether the refusal was a throttle (429: locked; 503: busy or Redis down)."""

    retry_after_s: int = 0
    status: int = 200

    def _refuse(self, status: int, retry_after_s: int, message: str, code: str) -> NoReturn:
        self.status, self.retry_after_s = status, max(1, retry_after_s)
        raise ValidationError(message, code=code)

    def _locked(self, lock: throttle.Lock) -> NoReturn:
        minutes = -(-lock.retry_after_s // 60)
        self._refuse(
            429,
            lock.retry_after_s,
            ngettext(
                "Too many failed sign-ins. Try again in %(minutes)d minute.",
                "Too many failed sign-ins. Try again in %(minutes)d minutes.",
                minutes,
            )
            % {"minutes": minutes},
            "locked",
        )

    def _busy(self) -> NoReturn:
        self._refuse(
            503,
            BUSY_RETRY_AFTER_S,
            gettext("Signing in is busy right now. Try again in a moment."),
            "busy",
        )

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        if not username or not self.cleaned_data.get("password"):
            return super().clean()  # a required field's error; no hash
        address = self.request.META.get("REMOTE_ADDR", "") if self.request else ""
        try:
            lock = throttle.login_locked(username=username, address=address)
        except throttle.ThrottleUnavailableError:
            self._busy()
        if lock is not None:
            self._locked(lock)
        slot = throttle.hashing_slot()
        if not slot.acquire(timeout=settings.LOGIN_HASH_WAIT_SECONDS):
            self._busy()
        try:
            cleaned = super().clean()
        except ValidationError as error:
            slot.release()
            if error.code in ("invalid_login", "inactive"):
                self._count_failure(username, address)
            raise
        slot.release()
        throttle.login_succeeded(username=username)
        return cleaned

    def _count_failure(self, username: str, address: str) -> None:
        try:
            failure = throttle.login_failed(username=username, address=address)
        except throttle.ThrottleUnavailableError:
            return  # refused already as a wrong password; the next attempt fails closed
        if failure.locked is not None:
            login_lockout_record(
                username=username,
                address=address,
                scope=failure.locked.scope,
                locked_for_s=failure.locked.retry_after_s,
            )


class ThrottledAuthenticationForm(ThrottledLogin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLogin, AdminAuthenticationForm):
    pass
