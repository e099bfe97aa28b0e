"""Signed-out htmx requests: htmx follows the login redirect itself and would swap the login
page into a fragment (a room card, a row). Such a request gets `HX-Redirect` to the login page
instead, with `next` back to the page the user was on, and the browser navigates there."""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url


class HtmxLoginRedirectMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.headers.get("HX-Request") != "true" or response.status_code != 302:
            return response
        login = resolve_url(settings.LOGIN_URL)
        if urlsplit(response["Location"]).path != login:
            return response
        # Back to the page the user looks at (htmx sends it), not to the fragment's URL.
        page = urlsplit(request.headers.get("HX-Current-URL", ""))
        back = (page.path + (f"?{page.query}" if page.query else "")) or request.get_full_path()
        redirected = HttpResponse(status=200)
        redirected["HX-Redirect"] = redirect_to_login(back, login)["Location"]
        return redirected


RENEWED_AT = "_idle_renewed_at"


class SessionIdleTimeout:
    """Sessions end after SESSION_COOKIE_AGE of inactivity: a request with a session renews its
    expiry (the session saved again, its cookie sent again) when the last renewal is
    SESSION_RENEW_SECONDS old, rather than on every request as SESSION_SAVE_EVERY_REQUEST would
    (a database write per request). An idle session thus ends between AGE - RENEW and AGE."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        session = getattr(request, "session", None)
        if session is not None and session.session_key and not session.is_empty():
            now = int(time.time())
            if now - int(session.get(RENEWED_AT, 0)) >= settings.SESSION_RENEW_SECONDS:
                session[RENEWED_AT] = now  # saved by SessionMiddleware, with a new expiry
        return response
