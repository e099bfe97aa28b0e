"""The runtime's tests share the real Celery worker fixtures (tests/workers.py)."""

from tests.workers import celery_worker_thread, worker  # noqa: F401
