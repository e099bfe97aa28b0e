"""Screen and API plumbing written once: the typed request every view receives, the role check
of a screen, and the JSON API's authentication (bearer token, else the session with CSRF)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import render
from django.utils.functional import Promise
from django.views.decorators.csrf import csrf_exempt
from django_htmx.middleware import HtmxDetails

from accounts.models import User
from accounts.selectors import user_roles
from accounts.services import token_authenticate


class AuthedRequest(HttpRequest):
    """A request behind ``login_required`` (or the API's authentication): the user is a
    signed-in ``User``, and django-htmx's middleware has set ``htmx``."""

    htmx: HtmxDetails
    user: User


def htmx_swap(request: AuthedRequest) -> bool:
    """Whether to answer with the swapped region only: an htmx request that is not a history
    restore (that one needs the whole page)."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def role_required[View: Callable[..., HttpResponseBase]](
    role: str, *, template: str, message: str | Promise
) -> Callable[[View], View]:
    """Signed in (else the login page) and holding ``role`` (else 403 with ``template``, whose
    context has ``message``: a translatable text, rendered in the reader's language)."""

    def decorator(view: View) -> View:
        @login_required
        @functools.wraps(view)
        def wrapper(request: AuthedRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if role not in user_roles(user=request.user):
                return render(request, template, {"message": str(message)}, status=403)
            return view(request, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorator


def api_error(status: int, code: str, message: str) -> JsonResponse:
    """The JSON API's error body."""
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


# Form bodies are what the CSRF check would parse (a bad multipart boundary raised there, and
# the body could not be read after it): the API reads JSON only, so they are refused unread.
_FORM_TYPES = frozenset({"multipart/form-data", "application/x-www-form-urlencoded"})


def form_body_refused(request: HttpRequest) -> JsonResponse | None:
    """415 for a form body sent to the JSON API (read before anything parses it)."""
    if request.method == "POST" and request.content_type in _FORM_TYPES:
        return api_error(415, "unsupported_media_type", "Send the body as application/json.")
    return None


def api_auth[View: Callable[..., HttpResponseBase]](view: View) -> View:
    """Bearer token, else the session (then CSRF applies, as for any cookie-authenticated POST).
    Identity never comes from the body. A form body is refused (415) before the CSRF check
    reads it."""

    @csrf_exempt
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            user = token_authenticate(raw=header.removeprefix("Bearer ").strip())
            if user is None:
                return api_error(401, "invalid_token", "The bearer token is unknown or revoked.")
            request.user = user
        elif request.user.is_authenticated:
            if (refused := form_body_refused(request)) is not None:
                return refused
            # process_view reads only the view's csrf_exempt flag: None has none, so the check
            # always applies (the stubs want a view).
            rejected = CsrfViewMiddleware(lambda r: HttpResponse()).process_view(
                request,
                None,  # type: ignore[arg-type]
                (),
                {},
            )
            if rejected is not None:
                return api_error(
                    403, "csrf_failed", "CSRF check failed for a session-authenticated request."
                )
        else:
            return api_error(
                401, "not_authenticated", "Sign in or send Authorization: Bearer <token>."
            )
        return view(request, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
