"""Fixtures of the chaos tests: a seeded random source (the seed is printed, and
CHAOS_SEED=<n> replays it), the number of trials (CHAOS_TRIALS, default 2), the processes a
test starts, and the figures every test adds to CHAOS_FIGURES (a JSON file) when that is set:
`bench/chaos.py` runs these tests and puts the figures in the benchmark report."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.invariants import Report, invariants_check
from tests.chaos.stack import Stack, wait_for

TRIALS = int(os.environ.get("CHAOS_TRIALS", "2"))
SETTLE_TIMEOUT = float(os.environ.get("CHAOS_SETTLE_TIMEOUT", "90"))
# The workers of these tests take work nobody does for this long as lost (production: 20 s).
STALE_AFTER_S = "3"
# Lines of each process's log a failed chaos test prints.
LOG_TAIL_LINES = 300

_figures: dict[str, Any] = {}

# Trials book from day `base` to this day ahead, then on the same days again an hour later (and
# so on): no slot of a trial meets an earlier trial's, and none is refused as too far ahead
# (BOOKING_HORIZON_DAYS, 90). A soak makes a hundred trials or more per test; before this, every
# trial past day 90 failed as a lost booking.
LAST_TRIAL_DAY = 85


def trial_when(n: int, base: int) -> tuple[int, int]:
    """The day (from today) and the hour shift of trial ``n`` of a test whose trials start on
    day ``base``."""
    span = LAST_TRIAL_DAY - base + 1
    return base + n % span, n // span


@dataclass
class Chaos:
    """One test's random source, trial count and figures."""

    name: str
    seed: int
    trials: int = TRIALS
    rng: random.Random = field(init=False)
    figures: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def check(self, trial: int, runs: list[Any], expect: dict[str, str] | None = None) -> Report:
        """Wait until every run of the trial is terminal or waits for a human, then check the
        invariants on the whole database; fail naming the seed and the trial."""
        report = settle_and_check()
        lost = 0
        if expect:
            from agentops.models import AgentRun

            rows = AgentRun.objects.filter(pk__in=list(expect)).values_list("pk", "status")
            statuses = {str(pk): status for pk, status in rows}
            lost = sum(
                statuses.get(str(run_id)) != wanted for run_id, wanted in expect.items() if wanted
            )
        f = self.figures
        f["trials"] = f.get("trials", 0) + 1
        f["runs"] = f.get("runs", 0) + len(runs)
        for kind, count in report.as_json().items():
            if isinstance(count, int) and kind not in ("runs", "bookings"):
                f[kind] = f.get(kind, 0) + count
        f["lost_bookings"] = f.get("lost_bookings", 0) + lost + report.counts.get("lost", 0)
        _figures[self.name] = f | {"seed": self.seed}
        where = f"{self.name} seed={self.seed} trial={trial}"
        assert report.ok, f"{where}: {report}"
        assert not lost, f"{where}: runs did not end as expected: {_outcomes(expect)}"
        return report


def _outcomes(expect: dict[str, str] | None) -> list[tuple[str, str, str, str]]:
    from agentops.models import AgentRun

    runs = AgentRun.objects.filter(pk__in=list(expect or {}))
    return [(str(r.pk)[:8], r.status, r.outcome, r.reply[:120]) for r in runs]


def settle_and_check(timeout: float = SETTLE_TIMEOUT) -> Report:
    """Wait (bounded) until no run is left without a terminal state or a human to
    wait for; then check every invariant. A run still moving at the timeout counts as hanging."""

    def settled() -> bool:
        return "hanging" not in invariants_check().counts

    with contextlib.suppress(AssertionError):  # the report below names what hangs
        wait_for(settled, timeout=timeout, message="the trial's runs to settle", interval=0.1)
    return invariants_check()


def age_unowned_work() -> None:
    """Time passes while no worker is alive: the dead worker's leases run out and its queued
    work goes stale, so the next worker's sweeper takes them over at its first sweep instead of
    after timeout + grace. Only called when no worker process is running."""
    from django.utils import timezone

    from agentops.models import Action, AgentRun

    past = timezone.now() - timedelta(minutes=5)
    Action.objects.filter(status="running").update(lease_expires_at=past)
    Action.objects.filter(status="queued").update(created_at=past)
    AgentRun.objects.filter(status="running").update(updated_at=past)


@pytest.fixture
def chaos(request) -> Chaos:
    seed = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1, 10**6))
    name = request.node.name
    print(f"\n{name}: CHAOS_SEED={seed} CHAOS_TRIALS={TRIALS}")  # shown with the failure
    started = time.monotonic()
    box = Chaos(name=name, seed=seed)
    yield box
    _figures.setdefault(name, box.figures | {"seed": seed})["seconds"] = round(
        time.monotonic() - started, 1
    )


@pytest.fixture(scope="session", autouse=True)
def _write_figures():
    yield
    path = os.environ.get("CHAOS_FIGURES")
    if path and _figures:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(_figures, indent=2, sort_keys=True))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed chaos test shows the end of every process's log, after asking each worker that is
    still alive for the stacks of its threads (Celery logs them on SIGUSR1): CI keeps only the
    output. Beat's "Sending due task" lines are left out."""
    report = yield
    stack = getattr(item, "funcargs", {}).get("stack")
    if report.failed and call.when == "call" and isinstance(stack, Stack):
        # Only workers: SIGUSR1 would end a web server (uvicorn has no handler for it).
        asked = [p for p in stack.procs.values() if p.poll() is None and "celery" in p.args]
        for proc in asked:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGUSR1)
        if asked:
            time.sleep(2)
        for log in sorted(stack.logs.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()
            kept = [line for line in lines if "Sending due task" not in line]
            report.sections.append((f"chaos log {log.name}", "\n".join(kept[-LOG_TAIL_LINES:])))
    return report


@pytest.fixture
def stack(transactional_db, tmp_path):
    """Processes of this test; every one of them ends before the database is flushed."""
    from agentops.runtime.redis_client import get_redis

    get_redis().flushdb()  # queues, rate counters and fault switches of earlier tests
    processes = Stack(logs=tmp_path, env={"AGENT_STALE_AFTER_SECONDS": STALE_AFTER_S})
    yield processes
    processes.stop_all()
    get_redis().flushdb()  # messages the killed workers left unacknowledged


@pytest.fixture
def bookers(rooms, e17, approver, admin_user) -> list[Any]:
    """Engineering people: a projector room of Engineering needs no approval for them."""
    return [e17, approver, admin_user]


def release_all_faults() -> None:
    from agentops.models import AgentRun
    from agentops.runtime.invoke import release_key
    from agentops.runtime.redis_client import get_redis

    redis = get_redis()
    for run_id in AgentRun.objects.values_list("pk", flat=True):
        redis.set(release_key(str(run_id)), "1", ex=300)
