from __future__ import annotations

from django.urls import path

from bookings.live import ScheduleConsumer

websocket_urlpatterns = [
    path("ws/schedule/", ScheduleConsumer.as_asgi()),
]
