from __future__ import annotations

from django.urls import path

from agentops.live.consumers import RunTraceConsumer

websocket_urlpatterns = [
    path("ws/runs/<uuid:run_id>/", RunTraceConsumer.as_asgi()),
]
