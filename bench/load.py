"""A bounded load run on loopback: 50 employees booking and querying through the JSON API while
approvals and reconciliation run, then the chaos invariants.

Starts the real stack against DATABASE_URL/REDIS_URL (uvicorn serving config.asgi, a Celery
worker with beat, as bench/cpu_probe.py does), creates the employees and their bearer tokens,
and drives them with one async HTTP client (httpx2, which the openai and mcp SDKs bring):

- every employee, concurrently, makes --ops operations at random: start a booking run
  (`POST /api/runs`, each on a slot of its own, so every one must succeed) and follow it
  (`GET /api/runs/<id>`) until it ends; search (`find_available_rooms`); list their bookings
  (`list_my_bookings`); book directly (`POST /api/tools/reserve_room` with an Idempotency-Key,
  three employees racing for each such slot: exactly one gets it, the others get `conflict`);
- every tenth employee asks for R16 (premium: HIGH), and the approver A01, signed in to the
  web (session + CSRF), approves each request in the approvals inbox as it appears;
- a few runs lose their write's response (injected), so the reconciler settles them while
  the load goes on; the worker's beat sweeps every 2 s.

Baseline, measured first in the same run on the same stack: one employee alone (the same
operations one at a time). Reports requests/s, runs/s, p50/p95/p99 per kind of request and of
runs, the ratio of the loaded p50 to the lone one, errors (a 5xx, an unexpected status, a
transport error or timeout), then the invariants of tests/chaos/invariants.py.

    make bench-load
    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/load.py [--employees 50] [--ops 6]

Prints one JSON object; exits 1 on any error, lost run or invariant violation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import time
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("AGENT_RATE_LIMIT_PER_MINUTE", "1000000")  # measure the path, not the limiter
os.environ.setdefault("AGENT_RUN_RATE_LIMIT_PER_MINUTE", "1000000")
os.environ.setdefault("DEBUG", "false")

from bench.cpu_probe import pct, running_stack  # noqa: E402

APPROVER = ("a01", "a01-demo-pass")  # the demo approver (bookings/demo.py)
LOSE_RECEIPT = [{"tool": "reserve_room", "kind": "lose_receipt", "calls": [1]}]


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50_ms": round(pct(values, 50), 1),
        "p95_ms": round(pct(values, 95), 1),
        "p99_ms": round(pct(values, 99), 1),
    }


class Slots:
    """Half-hour slots from 08:00 to 20:00 on days far ahead, each handed out once."""

    def __init__(self, tz: str, days_ahead: int) -> None:
        self.tz = ZoneInfo(tz)
        self.day0 = datetime.now(self.tz).date() + timedelta(days=days_ahead)
        self.n = 0

    def next(self) -> tuple[datetime, datetime]:
        n, self.n = self.n, self.n + 1
        day = self.day0 + timedelta(days=n // 24)
        start = datetime(day.year, day.month, day.day, 8, tzinfo=self.tz) + timedelta(
            minutes=30 * (n % 24)
        )
        return start, start + timedelta(minutes=30)


class Load:
    def __init__(self, client: Any, tokens: dict[str, str], slots: Slots, seed: int) -> None:
        self.client, self.tokens, self.slots = client, tokens, slots
        self.rng = random.Random(seed)
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.requests = 0
        self.run_ids: list[str] = []  # runs that must succeed
        self.approval_runs: list[str] = []
        self.races: list[list[dict]] = []
        self.transient: dict[str, int] = defaultdict(int)  # answers asked again

    async def call(
        self, kind: str, method: str, path: str, user: str, body: Any = None, **kw: Any
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} | kw.pop("headers", {})
        t0 = time.perf_counter()
        try:
            response = await self.client.request(method, path, json=body, headers=headers, **kw)
        except Exception as exc:  # a transport error or timeout is an error, never hidden
            self.errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:300])
            return 0, None
        self.latencies[kind].append((time.perf_counter() - t0) * 1000)
        self.requests += 1
        payload = response.json() if "json" in response.headers.get("content-type", "") else None
        return response.status_code, payload

    async def tool(
        self, kind: str, user: str, body: dict[str, Any], key: str | None = None
    ) -> tuple[int, Any]:
        """A tool call as a client following the contract makes it: a transient answer
        (yellow: timeout, unavailable, in_progress; or unknown_outcome) is asked again after
        its retry_after_ms, with the same Idempotency-Key, up to four times."""
        headers = {"Idempotency-Key": key} if key else {}
        for attempt in range(5):
            status, answer = await self.call(
                kind, "POST", f"/api/tools/{kind}", user, body, headers=headers
            )
            transient = isinstance(answer, dict) and (
                answer.get("signal") == "yellow" or answer.get("reason") == "unknown_outcome"
            )
            if status != 200 or not transient or attempt == 4:
                return status, answer
            self.transient[f"{kind}:{answer.get('reason')}"] += 1
            await asyncio.sleep(min(2.0, (answer.get("retry_after_ms") or 500) / 1000))
        return status, answer

    def expect(self, kind: str, status: int, allowed: tuple[int, ...], body: Any) -> bool:
        if status in allowed:
            return True
        if status:  # 0: already counted as a transport error
            self.errors.append(f"{kind}: HTTP {status}: {str(body)[:200]}")
        return False

    async def booking_run(self, user: str, room: str | None = None) -> None:
        start, end = self.slots.next()
        what = room or "a room"
        text = f"book {what} on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people"
        text += "" if room else " with a projector"
        status, body = await self.call("start_run", "POST", "/api/runs", user, {"request": text})
        if not self.expect("start_run", status, (202,), body):
            return
        (self.approval_runs if room else self.run_ids).append(body["run_id"])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status, run = await self.call("get_run", "GET", f"/api/runs/{body['run_id']}", user)
            if not self.expect("get_run", status, (200,), run):
                return
            if run["status"] in ("succeeded", "failed", "cancelled", "waiting_approval"):
                return
            await asyncio.sleep(0.25)  # a client polling its run

    async def search(self, user: str) -> None:
        start, end = self.slots.next()
        args = {"start_at": start.isoformat(), "end_at": end.isoformat(), "attendees": 3}
        status, body = await self.tool("find_available_rooms", user, args)
        if self.expect("find_available_rooms", status, (200,), body) and not body.get("ok"):
            self.errors.append(f"find_available_rooms refused: {str(body)[:200]}")

    async def my_bookings(self, user: str) -> None:
        status, body = await self.tool("list_my_bookings", user, {"limit": 10})
        if self.expect("list_my_bookings", status, (200,), body) and not body.get("ok"):
            self.errors.append(f"list_my_bookings refused: {str(body)[:200]}")

    async def race(self, users: list[str]) -> None:
        """Three employees book the same room and slot directly, each with a key of its own."""
        start, end = self.slots.next()
        status, found = await self.tool(
            "find_available_rooms",
            users[0],
            {"start_at": start.isoformat(), "end_at": end.isoformat(), "attendees": 2},
        )
        if not self.expect("find_available_rooms", status, (200,), found) or not found.get("ok"):
            return
        room = next((r for r in found["data"]["rooms"] if r["room_id"] == "R9"), None)
        if room is None:
            self.errors.append(f"R9 not offered for a free slot: {str(found)[:200]}")
            return
        args = {
            "room_id": "R9",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": 2,
            "expected_version": room["version"],
        }
        answers = await asyncio.gather(
            *(self.tool("reserve_room", u, args, key=uuid.uuid4().hex) for u in users)
        )
        bodies = [b for s, b in answers if self.expect("reserve_room", s, (200,), b)]
        self.races.append(bodies)

    async def employee(self, user: str, ops: int, others: list[str]) -> None:
        for _ in range(ops):
            choice = self.rng.random()
            if choice < 0.4:
                await self.booking_run(user)
            elif choice < 0.65:
                await self.search(user)
            elif choice < 0.9:
                await self.my_bookings(user)
            else:
                await self.race([user, *self.rng.sample(others, 2)])


class Approver:
    """A01 in the web: signs in (session + CSRF) and approves each pending request."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.latencies: list[float] = []
        self.approved = self.refreshed = 0
        self.errors: list[str] = []

    async def sign_in(self) -> None:
        page = await self.client.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        answer = await self.client.post(
            "/login/",
            data={"username": APPROVER[0], "password": APPROVER[1], "csrfmiddlewaretoken": token},
        )
        if answer.status_code != 302:
            raise RuntimeError(f"the approver could not sign in: {answer.status_code}")

    async def decide(self, request_id: str) -> None:
        t0 = time.perf_counter()
        answer = await self.client.post(
            f"/approvals/{request_id}/decide/",
            data={
                "decision": "approve",
                "reason": "load test",
                "csrfmiddlewaretoken": self.client.cookies.get("csrftoken"),
            },
        )
        self.latencies.append((time.perf_counter() - t0) * 1000)
        if answer.status_code != 302:
            self.errors.append(f"approve: HTTP {answer.status_code}")
        else:
            self.approved += 1

    async def refresh(self, request_id: str) -> None:
        """A request whose approval drifted (R16's schedule moved on since): ask again."""
        answer = await self.client.post(
            f"/approvals/{request_id}/refresh/",
            data={"csrfmiddlewaretoken": self.client.cookies.get("csrftoken")},
        )
        if answer.status_code != 302:
            self.errors.append(f"refresh: HTTP {answer.status_code}")
        else:
            self.refreshed += 1

    async def serve(self, stop: asyncio.Event) -> None:
        from approvals.models import ApprovalRequest

        def inbox() -> list[tuple[str, str]]:
            from django.db import connection

            try:
                rows = ApprovalRequest.objects.filter(status__in=["pending", "stale"])
                return [(str(pk), status) for pk, status in rows.values_list("pk", "status")]
            finally:
                connection.close()

        refreshed: set[str] = set()
        while not stop.is_set():
            for request_id, status in await asyncio.to_thread(inbox):
                if status == "pending":
                    await self.decide(request_id)
                elif request_id not in refreshed:
                    refreshed.add(request_id)
                    await self.refresh(request_id)
            await asyncio.sleep(0.2)  # an approver glancing at the inbox


def wait_for_worker(timeout: float = 120) -> None:
    """Until the worker answers a one-hop no-op chain (short tries: a client's socket timeout
    is shorter than a worker's start on a busy machine)."""
    from redis.exceptions import TimeoutError as RedisTimeout

    from bench.cpu_probe import run_noop_chain

    deadline = time.monotonic() + timeout
    while True:
        try:
            run_noop_chain(1, timeout=2)
            return
        except (RuntimeError, RedisTimeout):
            if time.monotonic() > deadline:
                raise


def setup(employees: int) -> tuple[dict[str, str], list[str]]:
    import django

    django.setup()
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from accounts.models import User
    from accounts.services import token_issue
    from bookings.demo import load_demo_data

    call_command("migrate", verbosity=0)
    load_demo_data()
    group = Group.objects.get(name="employees")
    names = [f"load{i:02d}" for i in range(employees)]
    for name in names:
        user, _ = User.objects.get_or_create(
            username=name, defaults={"employee_id": name.upper(), "department": "Engineering"}
        )
        user.groups.add(group)
    users = {u.username: u for u in User.objects.filter(username__in=names)}
    return {name: token_issue(user=users[name], name="load") for name in names}, names


def start_reconciling_runs(names: list[str], slots: Slots, count: int) -> list[str]:
    """Runs whose write loses its response: the runtime must reconcile them under load."""
    from accounts.models import User
    from agentops.runtime.runs import run_start

    ids = []
    for name in names[:count]:
        start, end = slots.next()
        text = f"book a room on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people with a projector"
        run = run_start(
            user=User.objects.get(username=name), request_text=text, faults=LOSE_RECEIPT
        )
        ids.append(str(run.pk))
    return ids


def wait_settled(timeout: float, must_end: list[str]) -> dict[str, Any]:
    """Until no run hangs and the runs of ``must_end`` (approved ones) have ended; bounded."""
    from django.db import connection

    from agentops.models import AgentRun
    from tests.chaos.invariants import invariants_check

    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            report = invariants_check()
            open_runs = AgentRun.objects.filter(pk__in=must_end, finished_at__isnull=True)
            if "hanging" not in report.counts and not open_runs.exists():
                break
            time.sleep(0.2)
        return invariants_check().as_json() | {
            "seconds_after_load": round(timeout - (deadline - time.monotonic()), 1)
        }
    finally:
        connection.close()


def run_figures(ids: list[str]) -> dict[str, Any]:
    from agentops.models import AgentRun

    runs = list(AgentRun.objects.filter(pk__in=ids))
    done = [r for r in runs if r.finished_at]
    return {
        "runs": len(ids),
        "succeeded": sum(r.status == "succeeded" for r in runs),
        "not_succeeded": len(ids) - sum(r.status == "succeeded" for r in runs),
        **percentiles([(r.finished_at - r.created_at).total_seconds() * 1000 for r in done]),
    }


async def drive(port: int, tokens: dict[str, str], names: list[str], args: argparse.Namespace):
    import httpx2
    from django.conf import settings

    limits = httpx2.Limits(max_connections=args.employees + 10)
    base = f"http://127.0.0.1:{port}"
    async with (
        httpx2.AsyncClient(base_url=base, limits=limits, timeout=60) as client,
        httpx2.AsyncClient(base_url=base, timeout=60) as web,
    ):
        # Baseline: one employee alone, the same operations one at a time.
        lone = Load(client, tokens, Slots(settings.TIME_ZONE, 30), args.seed)
        t0 = time.monotonic()
        for _ in range(3):
            await lone.booking_run(names[0])
        for _ in range(10):
            await lone.search(names[0])
            await lone.my_bookings(names[0])
        lone_wall = time.monotonic() - t0

        approver = Approver(web)
        await approver.sign_in()
        stop = asyncio.Event()
        approving = asyncio.create_task(approver.serve(stop))
        load = Load(client, tokens, Slots(settings.TIME_ZONE, 45), args.seed + 1)
        reconciling = await asyncio.to_thread(
            start_reconciling_runs, names[1:], load.slots, args.reconcile
        )
        t0 = time.monotonic()
        premium = [n for i, n in enumerate(names) if i % 10 == 5]
        await asyncio.gather(
            *(load.employee(n, args.ops, [o for o in names if o != n]) for n in names),
            *(load.booking_run(n, room="R16") for n in premium),
        )
        wall = time.monotonic() - t0
        settled = await asyncio.to_thread(
            wait_settled, args.settle_timeout, load.approval_runs + reconciling
        )
        stop.set()
        await approving
    return lone, lone_wall, load, wall, approver, reconciling, settled


def machine() -> dict[str, Any]:
    import platform

    from django.db import connection

    from agentops.runtime.redis_client import get_redis

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
    return {
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "postgres": postgres,
        "redis": get_redis().info("server")["redis_version"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--employees", type=int, default=50)
    parser.add_argument("--ops", type=int, default=6, help="operations per employee")
    parser.add_argument("--reconcile", type=int, default=4, help="runs that lose a receipt")
    parser.add_argument("--worker-concurrency", type=int, default=4)
    parser.add_argument("--settle-timeout", type=float, default=180)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    tokens, names = setup(args.employees)
    from agentops.runtime.redis_client import get_redis

    get_redis().flushdb()
    with running_stack(
        worker_concurrency=args.worker_concurrency,
        beat=True,
        extra_env={"DEBUG": "false", "AGENT_SWEEP_SECONDS": "2"},
    ) as stack:
        wait_for_worker()
        lone, lone_wall, load, wall, approver, reconciling, settled = asyncio.run(
            drive(stack.port, tokens, names, args)
        )
    from tests.chaos.invariants import invariants_check

    invariants = invariants_check().as_json()
    runs = run_figures(load.run_ids)
    lone_all = [v for vs in lone.latencies.values() for v in vs]
    load_all = [v for vs in load.latencies.values() for v in vs]
    race_winners = [sum(1 for b in bodies if b.get("ok")) for bodies in load.races]
    race_refusals = {b.get("reason") for bodies in load.races for b in bodies if not b.get("ok")}
    errors = load.errors + lone.errors + approver.errors
    if any(w != 1 for w in race_winners) or race_refusals - {"conflict"}:
        errors.append(f"races: winners {race_winners}, refusals {sorted(map(str, race_refusals))}")
    operations = sum(len(v) for k, v in load.latencies.items() if k != "get_run")
    approvals = run_figures(load.approval_runs)
    reconciled = run_figures(reconciling)
    report = {
        "benchmark": "load",
        "employees": args.employees,
        "ops_per_employee": args.ops,
        "seconds": round(wall, 2),
        "requests": load.requests,
        "requests_per_s": round(load.requests / wall, 1),
        # Operations, not requests: a run is polled every 250 ms until it ends, so faster runs
        # mean fewer (cheap) requests for the same work: operations are the requests but polls.
        "operations": operations,
        "operations_per_s": round(operations / wall, 1),
        "runs_per_s": round(len(load.run_ids) / wall, 2),
        "latency": percentiles(load_all),
        "latency_by_kind": {k: percentiles(v) for k, v in sorted(load.latencies.items())},
        "runs": runs,
        "approvals": approvals
        | {"approved_by_a01": approver.approved, "refreshed_by_a01": approver.refreshed}
        | {"decide": percentiles(approver.latencies)},
        "reconciled_runs": reconciled,
        "races": {"races": len(race_winners), "winners_each": sorted(set(race_winners))},
        "baseline_one_employee": {
            "requests": lone.requests,
            "requests_per_s": round(lone.requests / lone_wall, 1),
            "latency": percentiles(lone_all),
            "runs": run_figures(lone.run_ids),
        },
        "ratio_p50_loaded_vs_alone": round(pct(load_all, 50) / pct(lone_all, 50), 2),
        "transient_answers_asked_again": dict(sorted(load.transient.items())),
        "errors": len(errors),
        "error_samples": errors[:10],
        "settled": settled,
        "invariants": invariants,
        "invariant_violations": sum(
            invariants[k]
            for k in ("overlaps", "receipts", "duplicates", "lost", "hanging", "trace_gaps")
        ),
        "machine": machine(),
    }
    print(json.dumps(report, indent=2))
    bad = (
        report["errors"]
        + report["invariant_violations"]
        + runs["not_succeeded"]
        + approvals["not_succeeded"]
        + reconciled["not_succeeded"]
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
