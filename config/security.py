"""What keeps secrets and foreign pages out at the edge: the settings filter of error reports,
the websocket Origin check and its fallback route, request-header limits, NUL bytes in a
request's path, and static files that never answer 500."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousOperation
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.views.debug import SafeExceptionReporterFilter

from config.webserver import HEADERS_TOO_LARGE

# Django's own list plus what names a connection string, a signing key or an address.
_HIDDEN = re.compile(
    r"API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL|DSN|LOCATION|HOSTS|BROKER|"
    r"CREDENTIAL|PRIVATE|SIGNING",
    flags=re.IGNORECASE,
)
# Any value that carries a scheme (postgres://, redis://, https://) is masked wherever it sits.
_URL_VALUE = re.compile(r"^[a-z][a-z0-9+.-]*://", flags=re.IGNORECASE)


class SecretsMaskedFilter(SafeExceptionReporterFilter):
    """Masks every setting whose name says secret or address (DATABASE_URL, REDIS_URL,
    APPROVAL_SIGNING_KEYS, OPENAI_API_KEY, CACHES' LOCATION, the channel layer's hosts...) and
    every string that looks like a URL, at any depth, whatever its key is called."""

    hidden_settings = _HIDDEN

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        if isinstance(value, str) and _URL_VALUE.match(value.strip()):
            return self.cleansed_substitute
        return super().cleanse_setting(key, value)


# --- websocket Origin ---------------------------------------------------------------------------

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def origin_key(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin, the port made explicit; None if it is not one."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host or parts.path not in ("", "/"):
        return None
    return scheme, host, port or _DEFAULT_PORTS[scheme]


def origin_allowed(origin: str, allowed: Iterable[str]) -> bool:
    key = origin_key(origin)
    return key is not None and key in {origin_key(a) for a in allowed}


class ExactOriginValidator:
    """Accepts a websocket only when its Origin header matches one of
    settings.WEBSOCKET_ALLOWED_ORIGINS exactly: scheme, host and port (80/443 when omitted).
    Anything else, a missing Origin included, is closed before the consumer runs."""

    def __init__(self, application: Callable[..., Awaitable[None]]) -> None:
        self.application = application

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        origin = dict(scope.get("headers", [])).get(b"origin", b"").decode("latin-1")
        if origin_allowed(origin, settings.WEBSOCKET_ALLOWED_ORIGINS):
            return await self.application(scope, receive, send)
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 4403})
        return None


# --- request headers ------------------------------------------------------------------------------


# What every HTTP answer carries, whoever made it: Django's pages get these from their
# middleware, but static files (served beside Django) and /mcp (an ASGI app of its own) came
# out bare. A header the answer already has is left as it is.
BASELINE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    # Not an HTML page (a page's own policy, with its nonce, comes from Django's middleware):
    # nothing it returns may run or embed anything.
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
)


class SecurityHeaders:
    """Adds BASELINE_HEADERS to every HTTP response that lacks them (static files, /mcp, the
    431 of HeaderLimits): the security headers do not depend on which app answered."""

    def __init__(self, application: Callable[..., Awaitable[None]]) -> None:
        self.application = application

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.application(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in BASELINE_HEADERS if k not in present]
                if extra:
                    message = message | {"headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.application(scope, receive, send_with_headers)


class HeaderLimits:
    """Refuses an HTTP request or websocket with too many headers, or too many bytes of them,
    before Django reads it: 431 JSON for HTTP, close 4431 for a websocket. The server's own
    limit (config.webserver: a request head past 32 KB is refused while it arrives) stops a
    single huge header line earlier still; this one holds whichever server runs the app."""

    def __init__(self, application: Callable[..., Awaitable[None]]) -> None:
        self.application = application

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        headers = scope.get("headers", [])
        if scope["type"] in ("http", "websocket") and (
            len(headers) > settings.MAX_REQUEST_HEADERS
            or sum(len(k) + len(v) for k, v in headers) > settings.MAX_REQUEST_HEADER_BYTES
        ):
            if scope["type"] == "websocket":
                await receive()
                await send({"type": "websocket.close", "code": 4431})
                return None
            body = HEADERS_TOO_LARGE
            await send(
                {
                    "type": "http.response.start",
                    "status": 431,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return None
        return await self.application(scope, receive, send)


# --- NUL bytes in the address -------------------------------------------------------------------


class RefuseNulInPath:
    """A NUL byte (%00) in the path is a 400 before any view runs: PostgreSQL cannot hold one in
    text, so a view that looked a path segment up answered 500 (DataError,
    `POST /bookings/B1%00/cancel/`). No URL of ours carries one. (Query values are the forms'
    business: each form refuses or strips what it cannot use.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path:
            return HttpResponseBadRequest(b"Bad Request", content_type="text/plain")
        return self.get_response(request)


# --- websocket routes -----------------------------------------------------------------------------

NO_SUCH_SOCKET = 4404


async def no_such_socket(scope: dict, receive: Callable, send: Callable) -> None:
    """The last websocket route: a path no consumer serves is refused at the handshake (close
    4404 before accept: the browser sees HTTP 403), not a "No route found" server error."""
    await receive()  # websocket.connect
    await send({"type": "websocket.close", "code": NO_SUCH_SOCKET})


# --- static files -----------------------------------------------------------------------------


class SafeStaticFilesHandler(ASGIStaticFilesHandler):
    """Django's static handler, except that a path reaching outside the static folders
    (`/static/%2e%2e/...`, which the server decodes to `..`) is a 404, not a 500."""

    def serve(self, request: HttpRequest) -> HttpResponse | FileResponse:
        try:
            return super().serve(request)
        except (SuspiciousOperation, ValueError) as exc:  # `..` out of the folder, a NUL byte
            raise Http404("not a static file") from exc
