"""Faults against real Celery worker processes, real Redis and real PostgreSQL, over several
trials with seeded random timing (`CHAOS_SEED` replays a run, `CHAOS_TRIALS` sets how many
trials each test makes). After every trial the invariants of tests/chaos/invariants.py are
checked on the whole database: no overlap, one receipt per booking, nothing doubled or lost,
no run left hanging, gap-free traces.

Every trial books three distinct slots (each must end `succeeded`) and lets two people ask
for R7 at the same hour (exactly one of them gets it)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from agentops.models import Action, AgentRun, TraceEvent
from agentops.runtime import queue
from agentops.runtime.runs import run_start
from bookings.models import Booking
from tests.chaos.conftest import (
    age_unowned_work,
    release_all_faults,
    settle_and_check,
    trial_when,
)
from tests.chaos.stack import pg_terminate_others, redis_restart, redis_restartable, wait_for
from tests.conftest import slot

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.django_db(transaction=True),
]

PAUSE_WRITE = {"tool": "reserve_room", "kind": "pause", "calls": [1]}
PAUSE_AFTER_COMMIT = {"tool": "reserve_room", "kind": "pause_after_commit", "calls": [1]}
LOSE_RECEIPT = {"tool": "reserve_room", "kind": "lose_receipt", "calls": [1]}


def booking_request(start, end, room: str | None = None) -> str:
    what = room or "a room"
    return (
        f"Book {what} on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people with a projector"
    )


class Trial:
    """The runs of one trial and what each must end as."""

    def __init__(
        self, n: int, bookers: list[Any], faults: list[dict] | None = None, every_run: bool = False
    ) -> None:
        day, shift = trial_when(n, 3)
        # Two hours apart, so one shift later (the next pass over the days) meets none of them.
        assert shift < 2, f"trial {n}: more trials than the days and hours of this test hold"
        self.runs, self.expect = [], {}
        hours = (9 + shift, 11 + shift, 13 + shift)
        for i, (user, hour) in enumerate(zip(bookers, hours, strict=True)):
            start, end = slot(days=day, hour=hour)
            run = run_start(
                user=user,
                request_text=booking_request(start, end),
                faults=faults if i == 0 or every_run else None,
            )
            self.runs.append(run)
            self.expect[run.pk] = "succeeded"
        start, end = slot(days=day, hour=16 + shift)
        self.pair = [
            run_start(user=user, request_text=booking_request(start, end, room="R7"))
            for user in bookers[:2]
        ]
        self.runs += self.pair

    def check(self, chaos, n: int) -> None:
        chaos.check(n, self.runs, self.expect)
        statuses = [AgentRun.objects.get(pk=r.pk).status for r in self.pair]
        assert statuses.count("succeeded") == 1, (
            f"seed={chaos.seed} trial={n}: two people asked for R7 at once: {statuses}"
        )


@pytest.fixture(autouse=True)
def _no_run_limit(settings):
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 100_000
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 100_000


# --- SIGKILL a worker ---------------------------------------------------------------------------

KILL_POINTS = ("planning", "before_write", "after_commit", "anywhere")


def reach(point: str, trial: Trial, rng) -> None:
    first = trial.runs[0]
    if point == "planning":
        wait_for(
            lambda: TraceEvent.objects.filter(run__in=trial.runs, kind="model_step").exists(),
            timeout=60,
            message="a first plan",
        )
        time.sleep(rng.uniform(0, 0.4))  # the fault's timing, not a wait for something
    elif point == "before_write":
        wait_for(
            lambda: Action.objects.filter(
                run=first, tool="reserve_room", status="running"
            ).exists(),
            timeout=60,
            message="the write to start",
        )
    elif point == "after_commit":
        wait_for(
            lambda: Booking.objects.filter(run_id=str(first.pk)).exists(),
            timeout=60,
            message="the write to commit",
        )
    else:
        time.sleep(rng.uniform(0, 2.0))


def test_worker_killed_at_random_points_then_restarted(stack, chaos, bookers):
    """SIGKILL the worker (every thread, no acknowledgement) before, during and after the write,
    or anywhere at random; a new worker with beat takes over and must finish every run."""
    current = "w0"
    stack.worker(current)
    stack.wait_ready(current)
    for n in range(chaos.trials):
        point = KILL_POINTS[n] if n < len(KILL_POINTS) else chaos.rng.choice(KILL_POINTS)
        faults = {"before_write": [PAUSE_WRITE], "after_commit": [PAUSE_AFTER_COMMIT]}
        trial = Trial(n, bookers, faults.get(point))
        reach(point, trial, chaos.rng)
        stack.kill(current)
        chaos.figures.setdefault("kill_points", []).append(point)
        age_unowned_work()
        release_all_faults()
        current = f"w{n + 1}"
        stack.worker(current, beat=True)
        trial.check(chaos, n)
        if point in faults:  # the worker died holding the first run's write: it was reconciled
            write = Action.objects.get(run=trial.runs[0], tool="reserve_room")
            lookups = write.events.filter(kind="reconcile_lookup")
            found = "found" if point == "after_commit" else "absent"
            assert [e.payload["status"] for e in lookups] == [found], (chaos.seed, n, point)


# --- Redis restarted ----------------------------------------------------------------------------


def channel_layer_delivers_worker_events(user, attempts: int = 5) -> int:
    """After the restart, a subscriber of a new run's group gets the events a worker pushes.
    The stream is lossy by design (a push that meets a broken connection is dropped, and the
    page catches up from the database), so a run whose pushes all got lost is tried again with
    a new one; returns how many runs it took."""
    from asgiref.sync import async_to_sync
    from channels.db import database_sync_to_async
    from channels.layers import get_channel_layer
    from redis.exceptions import RedisError

    from agentops.runtime.trace import run_group, watch

    async def listen(n: int) -> bool:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        start, end = slot(days=40 + n, hour=10)
        run = await database_sync_to_async(run_start)(
            user=user, request_text=booking_request(start, end)
        )
        await database_sync_to_async(watch)(run_group(run.pk), channel)  # as the page does
        await layer.group_add(run_group(run.pk), channel)
        deadline = time.monotonic() + 15
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = await asyncio.wait_for(layer.receive(channel), left)
            except (TimeoutError, RedisError):
                continue
            if {e["kind"] for e in message.get("events", [])} - {"run_started"}:
                return True
        return False

    for n in range(1, attempts + 1):
        if async_to_sync(listen)(n):
            return n
    return 0


def test_redis_restarted_mid_run(stack, chaos, bookers):
    """Broker and channel layer go down and come back on the same port, at a random moment of
    the trial's runs, with their data or (every other trial) without: nothing is lost or
    doubled, and live events flow again afterwards."""
    if not redis_restartable():
        pytest.skip("Redis is not this test run's own (REDIS_URL set): not restarted")
    stack.worker("w", beat=True)
    stack.wait_ready("w")
    outages = []
    for n in range(chaos.trials):
        trial = Trial(n, bookers)
        keep = n % 2 == 0  # every other restart loses everything Redis held
        time.sleep(chaos.rng.uniform(0, 1.0))  # the fault's timing
        down = redis_restart(down_for=chaos.rng.uniform(0, 1.0), keep_data=keep)
        outages.append({"seconds": round(down, 2), "kept_data": keep})
        trial.check(chaos, n)
    chaos.figures["redis_outages"] = outages
    took = channel_layer_delivers_worker_events(bookers[0])
    chaos.figures["live_runs_until_events_flow"] = took
    assert took, f"seed={chaos.seed}: no live event from a worker after the restart"
    assert settle_and_check().ok


# --- PostgreSQL sessions terminated ----------------------------------------------------------------


def test_database_sessions_terminated_mid_transaction(stack, chaos, bookers):
    """`pg_terminate_backend` on every session of the workers at random moments (idle, or in
    the middle of a transaction): the work they lose is found again and finished once."""
    stack.worker("w", beat=True)
    stack.wait_ready("w")
    terminated = 0
    for n in range(chaos.trials):
        trial = Trial(n, bookers, [LOSE_RECEIPT] if n % 2 else None)
        for _ in range(3):
            time.sleep(chaos.rng.uniform(0.05, 0.6))  # the fault's timing
            terminated += pg_terminate_others()
        trial.check(chaos, n)
    chaos.figures["sessions_terminated"] = terminated
    assert terminated, f"seed={chaos.seed}: no worker session was ever terminated"


# --- the same task delivered twice ---------------------------------------------------------------


def deliver_again(runs: list[Any], sent: Counter, rng) -> None:
    """Send once more every task the runtime may have sent for these runs' current state, at
    most twice per task and arguments (Celery delivers at least once)."""
    from config.celery import app

    def send(name: str, *args: Any) -> None:
        if sent[(name, *args)] < 2:
            sent[(name, *args)] += 1
            app.send_task(name, args=list(args))

    for run in AgentRun.objects.filter(pk__in=[r.pk for r in runs]):
        if run.turn:
            send(queue.STEP, str(run.pk), run.turn)
    for action in Action.objects.filter(run__in=runs):
        send(queue.EXECUTE, str(action.pk))
        if not action.readonly:
            send(queue.RECONCILE, str(action.pk))
    time.sleep(rng.uniform(0, 0.05))  # the duplicates' timing


def test_every_task_delivered_twice(stack, chaos, bookers):
    """Duplicates of every step, execution and reconciliation (one run of each trial also loses
    its write's response, so reconciliation runs), racing the originals."""
    stack.worker("w", beat=True)
    stack.wait_ready("w")
    for n in range(chaos.trials):
        trial = Trial(n, bookers, [LOSE_RECEIPT])
        sent: Counter = Counter()
        deadline = time.monotonic() + 30
        while (
            time.monotonic() < deadline
            and AgentRun.objects.filter(
                pk__in=[r.pk for r in trial.runs], status="running"
            ).exists()
        ):
            deliver_again(trial.runs, sent, chaos.rng)
        chaos.figures["duplicates_sent"] = chaos.figures.get("duplicates_sent", 0) + sum(
            sent.values()
        )
        trial.check(chaos, n)


# --- two sweepers at once ---------------------------------------------------------------------------


def sweep_until(stop: threading.Event, counts: Counter) -> None:
    from agentops.runtime.sweeper import sweep

    try:
        while not stop.is_set():
            for kind, count in sweep().items():
                counts[kind] += count
    finally:
        connection.close()


def test_two_sweepers_at_once(stack, chaos, bookers):
    """Workers die holding every trial's writes; two new workers with beat and two sweeper
    threads of this process take the same dead work over at the same time: each lease is
    expired once per attempt, and nothing is doubled."""
    holders = ["w0"]
    stack.worker("w0")
    stack.wait_ready("w0")
    for n in range(chaos.trials):
        trial = Trial(n, bookers, [PAUSE_WRITE], every_run=True)
        wait_for(
            lambda t=trial: (
                Action.objects.filter(
                    run__in=t.runs[:3], tool="reserve_room", status="running"
                ).count()
                == 3
            ),
            timeout=60,
            message="the three paused writes",
        )
        time.sleep(chaos.rng.uniform(0, 0.5))  # let the R7 pair get anywhere
        for name in holders:
            stack.kill(name)
        age_unowned_work()
        release_all_faults()
        stop, counts = threading.Event(), Counter()
        sweepers = [threading.Thread(target=sweep_until, args=(stop, counts)) for _ in range(2)]
        for t in sweepers:
            t.start()
        try:
            holders = [f"w{n}a", f"w{n}b"]
            for name in holders:
                stack.worker(name, beat=True)
            settle_and_check()
        finally:
            stop.set()
            for t in sweepers:
                t.join(30)
        chaos.figures["leases_expired_by_test_sweepers"] = chaos.figures.get(
            "leases_expired_by_test_sweepers", 0
        ) + counts.get("expired_leases", 0)
        for action in Action.objects.filter(run__in=trial.runs):
            kinds = Counter(action.events.values_list("kind", flat=True))
            assert kinds["lease_expired"] <= action.attempts, (chaos.seed, action.pk, kinds)
        trial.check(chaos, n)


# --- an approval expiring while its action is queued ----------------------------------------------


def r16_run(requester: Any, *, n: int, base: int) -> AgentRun:
    """A run asking for the premium room R16, which needs an approval (trial ``n`` of a test
    whose trials start on day ``base``)."""
    days, shift = trial_when(n, base)
    start, end = slot(days=days, hour=10 + shift)
    return run_start(
        user=requester,
        request_text=f"book R16 on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people",
    )


def pending_request(run: AgentRun, message: str = "the approval request") -> Any:
    """The run's pending approval request, once it is there."""
    from approvals.models import ApprovalRequest

    return wait_for(
        lambda: ApprovalRequest.objects.filter(run_ref=str(run.pk), status="pending").first(),
        timeout=60,
        message=message,
    )


def test_approval_expiring_while_its_action_is_queued(stack, chaos, bookers, settings):
    """R16 needs an approval. The approval is given with a short validity and either expires
    while the approved action waits in the queue (no worker runs), or races the worker at a
    random validity. Either the write runs on a valid approval, or the action freezes and the
    run waits for a fresh approval (a human with a reason); a fresh approval then books it,
    once."""
    from approvals.models import ApprovalRecord
    from approvals.services import approval_decide, approval_refresh

    requester, approver = bookers[0], bookers[1]
    stack.worker("w", beat=True)
    stack.wait_ready("w")
    for n in range(chaos.trials):
        run = r16_run(requester, n=n, base=20)
        request = pending_request(run)
        queued = n % 2 == 0
        if queued:  # the approved action waits in the queue until its approval has expired
            stack.stop("w")
            settings.APPROVAL_VALID_MINUTES = 0.5 / 60
        else:
            settings.APPROVAL_VALID_MINUTES = chaos.rng.uniform(0.05, 1.5) / 60
        assert approval_decide(
            request_id=request.pk, approver=approver, approve=True, reason="chaos"
        ).ok
        if queued:
            record = ApprovalRecord.objects.get(request=request)
            wait_for(
                lambda e=record.expires_at: timezone.now() > e,
                timeout=10,
                message="the approval to expire",
            )
            stack.worker("w", beat=True)
        settle_and_check()
        run.refresh_from_db()
        frozen = run.status == "waiting_approval"
        chaos.figures.setdefault("approvals_frozen", []).append(frozen)
        if queued:
            assert frozen, (chaos.seed, n, run.status, run.outcome)
        if frozen:
            request.refresh_from_db()
            assert request.status == "stale", (chaos.seed, n, request.status)
            assert run.events.filter(kind="approval_frozen").exists()
            assert not Booking.objects.filter(run_id=str(run.pk)).exists()
            settings.APPROVAL_VALID_MINUTES = 10
            assert approval_refresh(request_id=request.pk, approver=approver).ok
            fresh = pending_request(run, message="a fresh approval request")
            assert approval_decide(
                request_id=fresh.pk, approver=approver, approve=True, reason="fresh"
            ).ok
        wait_for(
            lambda r=run: AgentRun.objects.get(pk=r.pk).is_terminal,
            timeout=60,
            message="the approved run to end",
        )
        chaos.check(n, [run], {run.pk: "succeeded"})
        assert Booking.objects.filter(run_id=str(run.pk), status="confirmed").count() == 1


# --- a decision whose announcement is lost ------------------------------------------------------


def test_a_decision_whose_message_was_lost_still_resumes_the_run(stack, chaos, bookers):
    """The approver decides while no worker runs, and the message that would resume the run is
    lost (Redis restarted without its data, or the send failed during an outage): the sweeper
    finds the decided request of a waiting action and resumes the run from it."""
    from django.conf import settings

    from agentops.runtime.redis_client import get_redis
    from approvals.services import approval_decide

    requester, approver = bookers[0], bookers[1]
    stack.worker("w", beat=True)
    stack.wait_ready("w")
    for n in range(chaos.trials):
        run = r16_run(requester, n=n, base=50)
        request = pending_request(run)
        stack.stop("w")
        approve = chaos.rng.random() < 0.5
        assert approval_decide(
            request_id=request.pk, approver=approver, approve=approve, reason="chaos"
        ).ok
        assert get_redis().delete(settings.CELERY_TASK_DEFAULT_QUEUE) == 1  # the message, lost
        stack.worker("w", beat=True)
        wait_for(
            lambda r=run: AgentRun.objects.get(pk=r.pk).is_terminal,
            timeout=60,
            message="the decided run to end",
        )
        chaos.check(n, [run], {run.pk: "succeeded" if approve else "failed"})
