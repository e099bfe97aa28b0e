from __future__ import annotations

import os

import django

from config.handler import OneTripASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django.setup(set_prefix=False)
django_asgi = OneTripASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from agentops.mcp.server import mcp_mount  # noqa: E402
from approvals.routing import websocket_urlpatterns as approval_routes  # noqa: E402
from bookings.routing import websocket_urlpatterns as booking_routes  # noqa: E402
from config.security import (  # noqa: E402
    ExactOriginValidator,
    HeaderLimits,
    SafeStaticFilesHandler,
)
from console.routing import websocket_urlpatterns as run_routes  # noqa: E402

# On a developer's machine the app serves its own static files; behind a proxy in production
# (SERVE_STATIC=false) the proxy serves `collectstatic`'s output.
http_app = SafeStaticFilesHandler(django_asgi) if settings.SERVE_STATIC else django_asgi

# /mcp: the MCP server (streamable HTTP, bearer tokens); everything else as before. Header
# limits hold for all of it.
application = HeaderLimits(
    mcp_mount(
        ProtocolTypeRouter(
            {
                "http": http_app,
                "websocket": ExactOriginValidator(
                    AuthMiddlewareStack(URLRouter(run_routes + approval_routes + booking_routes))
                ),
            }
        )
    )
)
