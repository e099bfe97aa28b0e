from __future__ import annotations

from tests.workers import celery_worker_thread, worker  # noqa: F401  (shared)
