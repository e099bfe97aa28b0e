"""`make run` stopped with SIGTERM to its process group, and again while it stops, always stops
the embedded PostgreSQL and Redis it started (the launcher, config.run, as a real process)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from config import devservers

ROOT = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT = 240  # initdb, migrations and demo data on a shared two-core machine


def wait_for(predicate, timeout: float, message: str, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{message}: {log.read_text()[-3000:]}")
        time.sleep(0.1)


@pytest.fixture
def var() -> Iterator[Path]:
    """A var folder of its own, inside the checkout: PostgreSQL runs as another system user
    when the tests run as root, and pytest's tmp folders are private to root."""
    path = ROOT / "var" / f"launcher-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    yield path
    devservers.down(path)  # whatever the launcher left (nothing, when the test passes)
    shutil.rmtree(path, ignore_errors=True)


def test_sigterm_twice_to_the_process_group_stops_both_embedded_servers(var):
    log = var / "run.log"
    port = devservers.free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")} | {
        "AGENTOPS_VAR": str(var),
        "PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "config.run"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as `make run` in a shell
        )
    try:
        wait_for(lambda: devservers.port_open(port), STARTUP_TIMEOUT, "never served", proc, log)
        pg_port = devservers._pg_running(var / "pgdata")
        redis_port = devservers._redis_running(var / "redis")
        assert pg_port and redis_port
        assert (var / "run.pid").read_text().strip() == str(proc.pid)

        os.killpg(proc.pid, signal.SIGTERM)
        wait_for(lambda: "Stopping" in log.read_text(), 30, "never stopped", proc, log)
        os.killpg(proc.pid, signal.SIGTERM)  # a second signal while it stops
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)

    assert log.read_text().count("Stopping") == 1
    assert not (var / "run.pid").exists()
    assert devservers._pg_running(var / "pgdata") is None
    assert devservers._redis_running(var / "redis") is None
    assert not devservers.port_open(pg_port)
    assert not devservers.port_open(redis_port)
