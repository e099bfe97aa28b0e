from __future__ import annotations

from django.apps import AppConfig


class BookingsConfig(AppConfig):
    name = "bookings"
    verbose_name = "Bookings"

    def ready(self) -> None:
        from agentops.contract import on_run_finished
        from approvals.signals import approval_settled
        from bookings import decisions

        approval_settled.connect(
            decisions.on_approval_settled, dispatch_uid="bookings.approval_settled"
        )
        on_run_finished(decisions.on_run_finished)
