"""OAuth 2.0 protected-resource metadata (RFC 9728) for /mcp, and the ``WWW-Authenticate``
challenge of its 401 that points a client to it.

The resource takes the product's own bearer tokens (issued per person, as for the JSON API);
there is no OAuth authorization server in front of it, so the document names none and a
client gets its token from the product (README, "Tokens"). The document says how to send one
(the Authorization header only) and what the resource is.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.http.request import split_domain_port, validate_host
from django.views.decorators.http import require_GET

MCP_PATH = "/mcp"
WELL_KNOWN = "/.well-known/oauth-protected-resource"


def _origin(scheme: str, host: str | None) -> str:
    """The origin a client reached us at, when Django would accept that host; else the
    configured one (a forged Host header never names where to look)."""
    domain, _ = split_domain_port(host or "")
    if host and domain and validate_host(domain, settings.ALLOWED_HOSTS):
        return f"{scheme}://{host}"
    return settings.MCP_PUBLIC_ORIGIN


def document(origin: str) -> dict[str, Any]:
    return {
        "resource": f"{origin}{MCP_PATH}",
        "bearer_methods_supported": ["header"],
        "resource_name": "Rooms: governed meeting-room tools (MCP)",
    }


def metadata_url(origin: str) -> str:
    return f"{origin}{WELL_KNOWN}{MCP_PATH}"


def www_authenticate(scope: dict[str, Any]) -> str:
    """The challenge of a 401 from /mcp (RFC 6750 and RFC 9728 section 5.1)."""
    host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
    origin = _origin(scope.get("scheme", "http"), host)
    return f'Bearer error="invalid_token", resource_metadata="{metadata_url(origin)}"'


@require_GET
def protected_resource_metadata(request: HttpRequest) -> JsonResponse:
    """GET /.well-known/oauth-protected-resource[/mcp]: the metadata of the one resource."""
    origin = _origin(request.scheme or "http", request.get_host())
    response = JsonResponse(document(origin))
    response["Cache-Control"] = "public, max-age=3600"
    response["Access-Control-Allow-Origin"] = "*"  # public metadata, read by browser clients
    return response
