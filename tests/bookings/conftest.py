"""The booking tests that need a real Celery worker share its fixtures (tests/workers.py)."""

from tests.workers import celery_worker_thread, worker  # noqa: F401
