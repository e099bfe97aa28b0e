"""The site's sign-in page, throttled: a refusal of the throttle answers 429 (locked, or not the
account's turn yet) or 503 (busy) with Retry-After, the form shown again with why; a sign-in
that succeeded leaves the browser its device cookie."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponseBase

from accounts import throttle
from accounts.forms import DEVICE_COOKIE_META, ThrottledAuthenticationForm, ThrottledLogin


def throttled_response[R: HttpResponseBase](request: HttpRequest, response: R) -> R:
    """Give a sign-in page whose form the throttle refused its status and Retry-After; give a
    sign-in that succeeded the device cookie its form left in ``request.META``."""
    form = (getattr(response, "context_data", None) or {}).get("form")
    if isinstance(form, ThrottledLogin) and form.retry_after_s:
        response.status_code = form.status
        response["Retry-After"] = str(form.retry_after_s)
    if value := request.META.pop(DEVICE_COOKIE_META, ""):
        response.set_cookie(
            throttle.DEVICE_COOKIE,
            value,
            max_age=settings.LOGIN_DEVICE_TRUST_DAYS * 86400,
            secure=settings.SESSION_COOKIE_SECURE,
            httponly=True,
            samesite="Lax",
        )
    return response


class ThrottledLoginView(LoginView):
    form_class = ThrottledAuthenticationForm

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return throttled_response(request, super().dispatch(request, *args, **kwargs))
