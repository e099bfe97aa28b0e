from __future__ import annotations

import os

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


class SyncChainASGIHandler(ASGIHandler):
    """Django's ASGI handler with the middleware chain built in sync mode.

    Every view and middleware of this project is synchronous. Django's own ASGI handler runs
    each sync middleware method through `sync_to_async` (about 15 trips to the request's worker
    thread per request, ~1 ms of CPU under uvicorn); here the chain and the view take one trip.
    An async view would still work (Django adapts it with `async_to_sync`), only slower.
    """

    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


django.setup(set_prefix=False)
django_asgi = SyncChainASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from agentops.live.routing import websocket_urlpatterns as run_routes  # noqa: E402
from agentops.mcp.server import mcp_mount  # noqa: E402
from approvals.routing import websocket_urlpatterns as approval_routes  # noqa: E402
from config.security import (  # noqa: E402
    ExactOriginValidator,
    HeaderLimits,
    SafeStaticFilesHandler,
)

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
                    AuthMiddlewareStack(URLRouter(run_routes + approval_routes))
                ),
            }
        )
    )
)
