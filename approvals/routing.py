from __future__ import annotations

from django.urls import path

from approvals.live import InboxConsumer

websocket_urlpatterns = [
    path("ws/approvals/", InboxConsumer.as_asgi()),
]
