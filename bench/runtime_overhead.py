"""What governance costs.

1. In-process: a governed `reserve_room` (gate + idempotency record + trace, as the JSON API
   runs it) against the bare booking service, same process, same run, alternating batches.
2. End to end: a two-call booking run (search, then reserve) through a real Celery worker and
   Redis, p50/p95 from the run's creation to its verified finish, at 1 and 16 concurrent runs.

    make bench-runtime            # throwaway embedded servers
    .venv/bin/python bench/runtime_overhead.py   # against DATABASE_URL/REDIS_URL

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("AGENT_RATE_LIMIT_PER_MINUTE", "1000000")  # measure the path, not the limiter


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Slots:
    """Distinct, conflict-free one-hour windows across rooms and days."""

    def __init__(self, rooms: list[str]) -> None:
        tz = ZoneInfo("Asia/Shanghai")
        self.base = datetime.now(tz).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(
            days=1
        )
        self.rooms, self.i = rooms, 0

    def next(self) -> tuple[str, datetime, datetime]:
        room = self.rooms[self.i % len(self.rooms)]
        n = self.i // len(self.rooms)
        self.i += 1
        day, slot = divmod(n, 48)
        start = self.base + timedelta(days=day, minutes=30 * slot)
        return room, start, start + timedelta(minutes=30)


def in_process(calls: int, batch: int) -> dict:
    from accounts.models import User
    from agentops.execution.recorder import call_direct as tool_call_direct
    from bookings.models import Room
    from bookings.services import booking_reserve

    user = User.objects.get(username="e17")
    rooms = list(
        Room.objects.filter(
            bookable=True, requires_approval=False, department="Engineering", capacity__gte=2
        ).values_list("code", flat=True)
    )
    slots = Slots(rooms)
    bare, governed, errors = [], [], 0
    # warm up both paths (connections, imports, pydantic schemas)
    for _ in range(20):
        room, s, e = slots.next()
        booking_reserve(
            user=user,
            room_code=room,
            start_at=s,
            end_at=e,
            attendees=2,
            idempotency_key=f"w{slots.i}",
        )
        room, s, e = slots.next()
        tool_call_direct(
            user=User.objects.get(pk=user.pk),
            name="reserve_room",
            arguments={
                "room_id": room,
                "start_at": s.isoformat(),
                "end_at": e.isoformat(),
                "attendees": 2,
                "expected_version": Room.objects.get(code=room).schedule_version,
            },
        )
    done = 0
    while done < calls:
        for _ in range(batch):
            room, s, e = slots.next()
            t0 = time.perf_counter()
            booking_reserve(
                user=user,
                room_code=room,
                start_at=s,
                end_at=e,
                attendees=2,
                idempotency_key=f"bare-{slots.i}",
            )
            bare.append(time.perf_counter() - t0)
        for _ in range(batch):
            room, s, e = slots.next()
            version = Room.objects.get(
                code=room
            ).schedule_version  # what the model would have observed
            t0 = time.perf_counter()
            envelope = tool_call_direct(
                user=user,
                name="reserve_room",
                arguments={
                    "room_id": room,
                    "start_at": s.isoformat(),
                    "end_at": e.isoformat(),
                    "attendees": 2,
                    "expected_version": version,
                },
            )
            governed.append(time.perf_counter() - t0)
            errors += 0 if envelope["ok"] else 1
        done += batch
    bare_ms, gov_ms = statistics.mean(bare) * 1000, statistics.mean(governed) * 1000
    return {
        "calls_each": len(bare),
        "bare_service_mean_ms": round(bare_ms, 3),
        "bare_service_p50_ms": round(pct(bare, 50) * 1000, 3),
        "governed_mean_ms": round(gov_ms, 3),
        "governed_p50_ms": round(pct(governed, 50) * 1000, 3),
        "bare_calls_per_s": round(1000 / bare_ms, 1),
        "governed_calls_per_s": round(1000 / gov_ms, 1),
        "overhead_ratio": round(gov_ms / bare_ms, 3),
        "governed_errors": errors,
    }


def in_process_read(calls: int) -> dict:
    """The same comparison for a read: find_available_rooms against bookings.selectors.room_search."""
    from accounts.models import User
    from agentops.execution.recorder import call_direct as tool_call_direct
    from bookings.selectors import room_search

    user = User.objects.get(username="e17")
    tz = ZoneInfo("Asia/Shanghai")
    start = datetime.now(tz).replace(hour=10, minute=0, second=0, microsecond=0) + timedelta(days=2)
    end = start + timedelta(hours=1)
    args = {
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": 3,
        "equipment": ["projector"],
    }
    bare, governed = [], []
    for _ in range(20):
        room_search(start_at=start, end_at=end, attendees=3, equipment=["projector"])
        tool_call_direct(user=user, name="find_available_rooms", arguments=args)
    for _ in range(calls):
        t0 = time.perf_counter()
        room_search(start_at=start, end_at=end, attendees=3, equipment=["projector"])
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tool_call_direct(user=user, name="find_available_rooms", arguments=args)
        governed.append(time.perf_counter() - t0)
    bare_ms, gov_ms = statistics.mean(bare) * 1000, statistics.mean(governed) * 1000
    return {
        "calls_each": calls,
        "bare_selector_mean_ms": round(bare_ms, 3),
        "governed_mean_ms": round(gov_ms, 3),
        "overhead_ratio": round(gov_ms / bare_ms, 3),
    }


def _database_url() -> str:
    from django.db import connection

    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgresql://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def end_to_end(runs_at_1: int, concurrent: int, rounds: int, worker_concurrency: int) -> dict:
    from django.conf import settings

    from accounts.models import User
    from agentops.models import AgentRun
    from agentops.redis_client import get_redis
    from agentops.runtime.runs import run_start

    get_redis().flushdb()
    env = os.environ | {"DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL}
    log = tempfile.NamedTemporaryFile("w", prefix="bench-worker-", suffix=".log", delete=False)  # noqa: SIM115
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--loglevel=WARNING",
            f"--concurrency={worker_concurrency}",
            "-Q",
            settings.CELERY_TASK_DEFAULT_QUEUE,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    users = list(User.objects.filter(username__in=["e17", "a01", "admin"]))
    tz = ZoneInfo(settings.TIME_ZONE)
    day0 = datetime.now(tz).date() + timedelta(days=30)
    counter = iter(range(10**6))

    def request() -> tuple[User, str]:
        n = next(counter)
        day = day0 + timedelta(days=n // 20)
        hour = 8 + (n % 20) // 2
        minute = 30 * (n % 2)
        start = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
        end = start + timedelta(minutes=30)
        # every request fits a 2-person room; rooms fill up across the day's slots
        return users[
            n % len(users)
        ], f"book a room on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 2 people"

    def wait(ids: list) -> list[AgentRun]:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = list(AgentRun.objects.filter(pk__in=ids, finished_at__isnull=False))
            if len(done) == len(ids):
                return done
            time.sleep(0.01)
        raise RuntimeError("runs did not finish; see " + log.name)

    def latency(run: AgentRun) -> float:
        return (run.finished_at - run.created_at).total_seconds() * 1000

    try:
        warm = [run_start(user=u, request_text=t).pk for u, t in (request() for _ in range(4))]
        wait(warm)
        sequential = []
        for _ in range(runs_at_1):
            u, t = request()
            sequential.append(wait([run_start(user=u, request_text=t).pk])[0])
        burst = []
        for _ in range(rounds):
            ids = [
                run_start(user=u, request_text=t).pk
                for u, t in (request() for _ in range(concurrent))
            ]
            burst += wait(ids)
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(30)
    one = [latency(r) for r in sequential]
    many = [latency(r) for r in burst]
    statuses = [r.status for r in sequential + burst]
    return {
        "worker": f"prefork x{worker_concurrency}",
        "runs_at_1": len(one),
        "p50_ms_at_1": round(pct(one, 50), 1),
        "p95_ms_at_1": round(pct(one, 95), 1),
        "runs_at_16": len(many),
        "p50_ms_at_16": round(pct(many, 50), 1),
        "p95_ms_at_16": round(pct(many, 95), 1),
        "succeeded": statuses.count("succeeded"),
        "not_succeeded": len(statuses) - statuses.count("succeeded"),
        "tool_calls_per_run": 2,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--concurrent", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--worker-concurrency", type=int, default=4)
    parser.add_argument("--skip-e2e", action="store_true")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from bookings.demo import load_demo_data

    call_command("migrate", verbosity=0)
    load_demo_data()
    result = {
        "benchmark": "runtime_overhead",
        "in_process": in_process(args.calls, args.batch),
        "in_process_read": in_process_read(args.calls // 2),
    }
    if not args.skip_e2e:
        result["end_to_end"] = end_to_end(
            args.runs, args.concurrent, args.rounds, args.worker_concurrency
        )
    result["targets"] = {"overhead_ratio_max": 2.0, "p50_ms_at_1_max": 150}
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "postgres": connection.cursor().connection.info.server_version,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
