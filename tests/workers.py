from __future__ import annotations

import time

import pytest


@pytest.fixture(scope="module")
def celery_worker_thread(django_db_setup, django_db_blocker):
    """A real Celery worker (thread pool) consuming the real Redis broker, in this process so
    that it talks to the test database. Per module, so that a module can run its own worker
    processes instead (tests/agentops/test_worker_crash.py)."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    with (
        django_db_blocker.unblock(),
        start_worker(
            app,
            pool="threads",
            concurrency=4,
            perform_ping_check=False,
            loglevel="WARNING",
            shutdown_timeout=30,
        ) as worker,
    ):
        yield worker


@pytest.fixture
def worker(celery_worker_thread, transactional_db):
    """Runs need committed data (the worker has its own connections): transactional tests."""
    from agentops.runtime.redis_client import get_redis

    get_redis().flushdb()  # rate-limit counters and fault switches of earlier tests
    yield celery_worker_thread
    _wait_until_idle()


def _wait_until_idle(timeout: float = 20.0) -> None:
    """Let the work a test left in flight finish (queued, reserved and running tasks) before
    the database is flushed under it: a TRUNCATE racing a worker's insert deadlocks. Fails the
    test, naming what was still busy, when the worker does not go quiet in `timeout` seconds."""
    from celery.worker import state
    from django.conf import settings

    from agentops.models import AgentRun
    from agentops.runtime.invoke import release_key
    from agentops.runtime.redis_client import get_redis

    redis = get_redis()
    for run_id in AgentRun.objects.values_list("pk", flat=True):
        redis.set(release_key(str(run_id)), "1", ex=60)  # let paused faults go

    def busy() -> dict[str, object]:
        queued = redis.llen(settings.CELERY_TASK_DEFAULT_QUEUE)
        return {
            name: value
            for name, value in (
                ("active", sorted(r.name for r in list(state.active_requests))),
                ("reserved", sorted(r.name for r in list(state.reserved_requests))),
                ("queued", queued),
            )
            if value
        }

    quiet_since = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if busy():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 0.3:
            return
        time.sleep(0.05)
    still = busy() or "nothing at the last look, but never quiet for 0.3s"
    raise AssertionError(f"the worker was still busy after {timeout}s: {still}")


def wait_for_run(run_id, statuses=("succeeded", "failed", "cancelled"), timeout=30.0):
    from agentops.models import AgentRun

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = AgentRun.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        time.sleep(0.05)
    raise AssertionError(
        f"run {run_id} still {AgentRun.objects.get(pk=run_id).status} after {timeout}s"
    )


def wait_until(predicate, timeout=30.0, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {message}")


def release_faults(run_id) -> None:
    from agentops.runtime.invoke import release_key
    from agentops.runtime.redis_client import get_redis

    get_redis().set(release_key(str(run_id)), "1", ex=300)
