from __future__ import annotations

import time

import pytest


@pytest.fixture(scope="session")
def celery_worker_thread(django_db_setup, django_db_blocker):
    """A real Celery worker (thread pool) consuming the real Redis broker, in this process so
    that it talks to the test database."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    with django_db_blocker.unblock(), start_worker(
        app, pool="threads", concurrency=4, perform_ping_check=False, loglevel="WARNING",
        shutdown_timeout=30,
    ) as worker:
        yield worker


@pytest.fixture
def worker(celery_worker_thread, transactional_db, demo):
    """Runs need committed data (the worker has its own connections): transactional tests."""
    from agentops.redis_client import get_redis

    get_redis().flushdb()  # rate-limit counters and fault switches of earlier tests
    return celery_worker_thread


def wait_for_run(run_id, statuses=("succeeded", "failed", "cancelled"), timeout=30.0):
    from agentops.models import AgentRun

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = AgentRun.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} still {AgentRun.objects.get(pk=run_id).status} after {timeout}s")
