from __future__ import annotations

app_name = "bookings"
urlpatterns: list = []
