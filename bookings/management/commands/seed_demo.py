from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from bookings.demo import load_demo_data


class Command(BaseCommand):
    help = "Load the demo rooms, users and groups (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        load_demo_data()
        self.stdout.write("Demo data loaded.")
