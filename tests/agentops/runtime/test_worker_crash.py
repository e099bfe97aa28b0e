"""A Celery worker process killed with SIGKILL in the middle of a write, then restarted (with
beat, so the sweeper runs): never a duplicate booking, never a silently lost run.

The dead worker's lease would run out after the tool's timeout + LEASE_GRACE; the test moves it
into the past instead of waiting for it, so the restarted worker's sweeper (every second here)
takes the write over at its next sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from agentops.models import Action
from agentops.runtime import registry
from agentops.runtime.runs import run_start
from agentops.runtime.timing import LEASE_GRACE
from bookings.models import Booking
from tests.conftest import slot
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("rooms"),
]

START, END = slot(days=4)
REQUEST = f"Book a room on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"
ROOT = Path(__file__).resolve().parents[3]


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgresql://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def start_worker(tmp_path: Path, name: str, *, beat: bool = False) -> subprocess.Popen:
    env = os.environ | {
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "AGENT_SWEEP_SECONDS": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    cmd = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "--pool=solo",
        "--loglevel=WARNING",
        "-n",
        f"{name}@%h",
        "-Q",
        settings.CELERY_TASK_DEFAULT_QUEUE,
    ]
    if beat:
        cmd += ["--beat", "--schedule", str(tmp_path / "beat-schedule")]
    log = (tmp_path / f"{name}.log").open("w")
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def kill_hard(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def expire_lease(run) -> None:
    """Let the lease of the dead worker's write run out now: it is the one the running
    action took (timeout + LEASE_GRACE), still in the future."""
    action = Action.objects.get(run=run, tool="reserve_room", status="running")
    timeout = timedelta(seconds=registry.get("reserve_room").meta.timeout_s)
    assert action.lease_expires_at == action.started_at + timeout + LEASE_GRACE
    assert action.lease_expires_at > timezone.now()
    Action.objects.filter(pk=action.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


@pytest.fixture
def fresh_broker():
    from agentops.runtime.redis_client import get_redis

    get_redis().flushdb()


@pytest.mark.parametrize("moment", ["after_commit", "before_commit"])
def test_worker_killed_mid_write_then_restarted(fresh_broker, e17, tmp_path, moment):
    kind = "pause_after_commit" if moment == "after_commit" else "pause"
    first = start_worker(tmp_path, "first")
    second = None
    try:
        run = run_start(
            user=e17,
            request_text=REQUEST,
            faults=[{"tool": "reserve_room", "kind": kind, "calls": [1]}],
        )
        wait_until(
            lambda: Action.objects.filter(run=run, tool="reserve_room", status="running").exists(),
            timeout=60,
            message="the write to start in the first worker",
        )
        if moment == "after_commit":
            wait_until(lambda: Booking.objects.exists(), message="the write to commit")
        kill_hard(first)
        assert Booking.objects.count() == (1 if moment == "after_commit" else 0)
        expire_lease(run)

        release_faults(run.pk)  # the restarted worker's calls must not pause
        second = start_worker(tmp_path, "second", beat=True)
        run = wait_for_run(run.pk, statuses=("succeeded",), timeout=90)
    finally:
        stop(first)
        if second is not None:
            stop(second)

    booking = Booking.objects.get()  # exactly one
    reserve = run.actions.get(tool="reserve_room")
    assert booking.idempotency_key == reserve.idempotency_key
    assert reserve.result["data"]["booking_id"] == booking.code
    assert booking.code in run.reply
    kinds = list(run.events.values_list("kind", flat=True))
    assert "lease_expired" in kinds and "reconcile_lookup" in kinds
    lookup = run.events.get(kind="reconcile_lookup")
    assert lookup.payload["status"] == ("found" if moment == "after_commit" else "absent")
    if moment == "before_commit":
        assert "reconcile_retry" in kinds and reserve.attempts == 2
