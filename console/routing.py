from __future__ import annotations

from django.urls import path

from console.live import NavCountsConsumer, RunCardConsumer

websocket_urlpatterns = [
    path("ws/runs/<uuid:run_id>/", RunCardConsumer.as_asgi()),
    path("ws/nav/", NavCountsConsumer.as_asgi()),
]
