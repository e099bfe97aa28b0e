"""The booking domain's periodic work (Celery beat: CELERY_BEAT_SCHEDULE in config/settings)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="bookings.tasks.release_no_shows_task", acks_late=True)
def release_no_shows_task() -> int:
    """Release the bookings whose check-in closed without one; how many were released."""
    from bookings.checkin import bookings_release_no_shows

    return len(bookings_release_no_shows().codes)
