"""The booking domain's periodic work (Celery beat: CELERY_BEAT_SCHEDULE in config/settings)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="bookings.tasks.release_no_shows_task", acks_late=True)
def release_no_shows_task() -> int:
    """Release the bookings whose check-in closed without one; how many were released."""
    from bookings.checkin import bookings_release_no_shows

    return len(bookings_release_no_shows().codes)


@shared_task(name="bookings.tasks.decision_mail_task", acks_late=True)
def decision_mail_task(request_id: str) -> None:
    """E-mail the requester an approver's decision (or its expiry)."""
    from bookings.decisions import decision_mail

    decision_mail(request_id=request_id)


@shared_task(name="bookings.tasks.run_failed_mail_task", acks_late=True)
def run_failed_mail_task(run_id: str, reply: str) -> None:
    """E-mail the requester of an approved request whose run then failed."""
    from bookings.decisions import run_failed_mail

    run_failed_mail(run_id=run_id, reply=reply)
