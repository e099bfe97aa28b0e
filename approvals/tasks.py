"""Approvals' periodic work (Celery beat: CELERY_BEAT_SCHEDULE in config/settings)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="approvals.tasks.approvers_mail_task", acks_late=True)
def approvers_mail_task() -> int:
    """Mail the approvers the requests their window held back; how many were mailed."""
    from approvals.services import approvers_mail_send

    return approvers_mail_send()
