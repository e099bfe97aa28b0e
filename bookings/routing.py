from __future__ import annotations

from django.urls import path

from bookings.live import MyBookingsConsumer

websocket_urlpatterns = [
    path("ws/bookings/", MyBookingsConsumer.as_asgi()),
]
