from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy


class BookingsConfig(AppConfig):
    name = "bookings"
    verbose_name = gettext_lazy("Bookings")
