from __future__ import annotations

from django.urls import path

from bookings.live import MyBookingsConsumer, ScheduleConsumer

websocket_urlpatterns = [
    path("ws/schedule/", ScheduleConsumer.as_asgi()),
    path("ws/bookings/", MyBookingsConsumer.as_asgi()),
]
