"""The sign-in forms of the site and of the admin, throttled (accounts.throttle): a locked
pair or address is refused before its password is hashed, an account past its slower bound waits
for its turn, and hashing waits for one of the process's few hashing slots."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, NoReturn

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.utils.translation import gettext, ngettext

from accounts import throttle
from accounts.services import login_lockout_record

BUSY_RETRY_AFTER_S = 5
# Where a successful sign-in leaves the device cookie's new value for the view to set (as
# Django's CSRF middleware leaves its token in request.META["CSRF_COOKIE"]).
DEVICE_COOKIE_META = "ACCOUNTS_SIGNIN_DEVICE"

# The mixin is only ever mixed into an AuthenticationForm; mypy checks it as one.
if TYPE_CHECKING:
    _LoginFormBase = AuthenticationForm
else:
    _LoginFormBase = object


class ThrottledLogin(_LoginFormBase):
    """Mixed into an AuthenticationForm. After ``is_valid()`` is False, ``retry_after_s`` and
    ``status`` say whether the refusal was a throttle (429: locked or not its turn yet; 503:
    busy or Redis down)."""

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

    def _slowed(self, seconds: float) -> NoReturn:
        whole = max(1, int(-(-seconds // 1)))
        self._refuse(
            429,
            whole,
            ngettext(
                "Many failed sign-ins for this account: signing in to it is slowed down. "
                "Try again in %(seconds)d second.",
                "Many failed sign-ins for this account: signing in to it is slowed down. "
                "Try again in %(seconds)d seconds.",
                whole,
            )
            % {"seconds": whole},
            "slowed",
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
        if not username or not self.cleaned_data.get("password") or self.request is None:
            return super().clean()  # a required field's error; no hash
        client = throttle.signin_client(self.request, username=username)
        try:
            standing = throttle.login_standing(username=username, client=client)
            if standing.lock is not None:
                self._locked(standing.lock)
            wait = throttle.login_turn(username=username, client=client, standing=standing)
        except throttle.ThrottleUnavailableError:
            self._busy()
        if wait < 0:
            self._slowed(-wait)
        time.sleep(wait)  # the account's turn: a delay, not a refusal
        slots = throttle.hashing_slots()
        priority = throttle.hashing_priority(client=client, standing=standing)
        if not slots.acquire(priority, timeout=settings.LOGIN_HASH_WAIT_SECONDS):
            self._busy()
        try:
            cleaned = super().clean()
        except ValidationError:
            # No user: the password was wrong (or the account unusable). A user: the password
            # was right and this door refused the person (a non-staff one at /admin/login/),
            # which is no guess.
            if self.user_cache is None:
                self._count_failure(username, client)
            else:
                throttle.login_succeeded(username=username, client=client)
            raise
        finally:
            slots.release()
        throttle.login_succeeded(username=username, client=client)
        self.request.META[DEVICE_COOKIE_META] = throttle.device_cookie(
            self.request, username=username
        )
        return cleaned

    def _count_failure(self, username: str, client: throttle.SignInClient) -> None:
        try:
            failure = throttle.login_failed(username=username, client=client)
        except throttle.ThrottleUnavailableError:
            return  # refused already as a wrong password; the next attempt fails closed
        if failure.locked is not None:
            login_lockout_record(
                username=username,
                address=client.address,
                scope=failure.locked.scope,
                locked_for_s=failure.locked.retry_after_s,
            )


class ThrottledAuthenticationForm(ThrottledLogin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLogin, AdminAuthenticationForm):
    pass
