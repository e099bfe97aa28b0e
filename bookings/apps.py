from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy


class BookingsConfig(AppConfig):
    name = "bookings"
    verbose_name = gettext_lazy("Bookings")

    def ready(self) -> None:
        from agentops.contract import on_run_finished
        from approvals.signals import approval_opened, approval_settled
        from bookings import decisions

        approval_settled.connect(
            decisions.on_approval_settled, dispatch_uid="bookings.approval_settled"
        )
        approval_opened.connect(
            decisions.on_approval_opened, dispatch_uid="bookings.approval_opened"
        )
        on_run_finished(decisions.on_run_finished)
