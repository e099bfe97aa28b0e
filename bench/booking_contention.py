"""Booking contention: booking_reserve against raw constrained INSERTs, same workload.

T threads each make A reservation attempts over overlapping random windows (a 30-minute grid
over a few days, K rooms), first through the service (``booking_reserve``), then as one plain
``INSERT`` per attempt on a psycopg connection in autocommit, relying on the exclusion
constraint alone. Both phases count attempts per second of wall time: confirmed and refused
alike, measured from the moment all threads are released (connections are opened before).
The two phases alternate for --rounds rounds; rates are medians over the rounds.

    make bench
    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/booking_contention.py [--threads 8]

Prints one JSON object on stdout; exits 1 if any attempt errored (a raw INSERT that PostgreSQL
aborts as a deadlock is counted apart, in raw_deadlocks) or any room is double-booked.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GRID = timedelta(minutes=30)
FIRST_SLOT_HOUR, SLOTS_PER_DAY = 8, 24  # 08:00-20:00
USERNAMES = ("e17", "e23", "a01", "admin")

RAW_INSERT = """
INSERT INTO bookings_booking
       (room_id, requester_id, during, attendees, status, idempotency_key, run_id, action_id,
        created_version, created_at)
VALUES (%s, %s, tstzrange(%s, %s, '[)'), %s, 'confirmed', %s, '', '', 0, now())
"""

DOUBLE_BOOKINGS = """
SELECT count(*)
  FROM bookings_booking a
  JOIN bookings_booking b ON a.room_id = b.room_id AND a.id < b.id AND a.during && b.during
 WHERE a.status = 'confirmed' AND b.status = 'confirmed'
"""


@dataclass(frozen=True)
class Attempt:
    room_id: int
    room_code: str
    user_index: int
    start: datetime
    end: datetime
    attendees: int
    key: str


@dataclass
class Tally:
    confirmed: int = 0
    conflicts: int = 0
    deadlocks: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    def error(self, exc: BaseException) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(repr(exc)[:300])

    def add(self, other: Tally) -> None:
        self.confirmed += other.confirmed
        self.conflicts += other.conflicts
        self.deadlocks += other.deadlocks
        self.errors += other.errors
        self.error_samples.extend(other.error_samples[: 5 - len(self.error_samples)])


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # Production runs with DEBUG off; on, every query is also timed and logged in memory.
    os.environ.setdefault("DEBUG", "false")
    import django

    django.setup()


def workload(
    *, threads: int, attempts: int, rooms: list[tuple[int, str]], days: int, seed: int, tag: str
) -> list[list[Attempt]]:
    """Per-thread attempt lists; the same seed gives the same windows to both phases."""
    from django.utils import timezone

    tz = timezone.get_current_timezone()
    tomorrow = timezone.localdate() + timedelta(days=1)
    first = datetime(tomorrow.year, tomorrow.month, tomorrow.day, FIRST_SLOT_HOUR, tzinfo=tz)
    plans = []
    for t in range(threads):
        rng = random.Random(seed * 1_000 + t)
        plan = []
        for i in range(attempts):
            room_id, room_code = rng.choice(rooms)
            slot = rng.randrange(SLOTS_PER_DAY)
            start = first + timedelta(days=rng.randrange(days)) + slot * GRID
            end = start + GRID * rng.randint(1, min(4, SLOTS_PER_DAY - slot))
            plan.append(
                Attempt(
                    room_id,
                    room_code,
                    rng.randrange(len(USERNAMES)),
                    start,
                    end,
                    rng.randint(1, 2),
                    f"bench-{tag}-{t}-{i}",
                )
            )
        plans.append(plan)
    return plans


def service_worker(
    plan: list[Attempt], users: list[Any], tally: Tally, ready: Callable[[], None]
) -> None:
    from django.db import connection

    from bookings.errors import BookingError
    from bookings.services import booking_reserve

    try:
        connection.ensure_connection()
        ready()
        for a in plan:
            try:
                booking_reserve(
                    user=users[a.user_index],
                    room_code=a.room_code,
                    start_at=a.start,
                    end_at=a.end,
                    attendees=a.attendees,
                    idempotency_key=a.key,
                )
            except BookingError as exc:
                if exc.reason == "conflict":
                    tally.conflicts += 1
                else:
                    tally.error(exc)
            except Exception as exc:  # counted, never hidden
                tally.error(exc)
            else:
                tally.confirmed += 1
    finally:
        connection.close()


def raw_worker(
    plan: list[Attempt], users: list[Any], tally: Tally, ready: Callable[[], None]
) -> None:
    import psycopg
    from django.conf import settings

    with psycopg.connect(settings.DATABASE_URL, autocommit=True) as conn:
        ready()
        for a in plan:
            try:
                conn.execute(
                    RAW_INSERT,
                    (a.room_id, users[a.user_index].pk, a.start, a.end, a.attendees, a.key),
                )
            except psycopg.errors.ExclusionViolation:
                tally.conflicts += 1
            except psycopg.errors.DeadlockDetected:
                # Two sessions inserting overlapping rows can each wait for the other inside the
                # exclusion check; PostgreSQL aborts one after deadlock_timeout (1 s by default).
                tally.deadlocks += 1
            except Exception as exc:  # counted, never hidden
                tally.error(exc)
            else:
                tally.confirmed += 1


def run_phase(
    worker: Callable[..., None], plans: list[list[Attempt]], users: list[Any]
) -> tuple[Tally, float]:
    """Run one worker per plan, released together; return the summed tally and wall seconds."""
    barrier = threading.Barrier(len(plans) + 1)
    tallies = [Tally() for _ in plans]

    def ready() -> None:
        barrier.wait(timeout=120)

    threads = [
        threading.Thread(target=worker, args=(plan, users, tally, ready), name=f"bench-{i}")
        for i, (plan, tally) in enumerate(zip(plans, tallies, strict=True))
    ]
    for t in threads:
        t.start()
    ready()
    started = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    total = Tally()
    for tally in tallies:
        total.add(tally)
    return total, elapsed


def reset_schedule() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM bookings_booking")
        cursor.execute("UPDATE bookings_room SET schedule_version = 0")
        # Start every phase from a table without dead rows left by the previous one.
        cursor.execute("VACUUM ANALYZE bookings_booking, bookings_room")


def scalar(sql: str) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--attempts", type=int, default=250, help="per thread")
    parser.add_argument("--rooms", type=int, default=4)
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="service/raw pairs, alternated")
    parser.add_argument("--warmup", type=int, default=25, help="attempts per thread, discarded")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_django()

    import django
    import psycopg
    from django.conf import settings
    from django.core.management import call_command

    from accounts.models import User
    from bookings.demo import load_demo_data
    from bookings.models import Room

    call_command("migrate", verbosity=0)
    load_demo_data()
    rooms = list(
        Room.objects.filter(bookable=True, capacity__gte=2)
        .order_by("code")
        .values_list("id", "code")[: args.rooms]
    )
    users_by_name = User.objects.in_bulk(USERNAMES, field_name="username")
    users = [users_by_name[name] for name in USERNAMES]

    def plans(tag: str, attempts: int) -> list[list[Attempt]]:
        return workload(
            threads=args.threads,
            attempts=attempts,
            rooms=rooms,
            days=args.days,
            seed=args.seed,
            tag=tag,
        )

    phases = (("service", service_worker), ("raw", raw_worker))
    if args.warmup:
        for name, worker in phases:
            reset_schedule()
            run_phase(worker, plans(f"warmup-{name}", args.warmup), users)
    # Rounds alternate the two phases on the same windows, so that a burst of load from
    # elsewhere on the machine (or a raw-insert deadlock stall) shows up as one outlier round.
    totals = {name: Tally() for name, _ in phases}
    rates: dict[str, list[float]] = {name: [] for name, _ in phases}
    doubles = dict.fromkeys(totals, 0)
    version_drift = 0
    for n in range(args.rounds):
        for name, worker in phases:
            reset_schedule()
            tally, seconds = run_phase(worker, plans(f"{name}-{n}", args.attempts), users)
            totals[name].add(tally)
            rates[name].append(args.threads * args.attempts / seconds)
            doubles[name] += scalar(DOUBLE_BOOKINGS)
            if name == "service":
                # Each confirmed reservation bumps its room's version once; nothing else does.
                bumps = scalar("SELECT coalesce(sum(schedule_version), 0) FROM bookings_room")
                version_drift += bumps - tally.confirmed
    reset_schedule()

    service, raw = totals["service"], totals["raw"]
    service_rate, raw_rate = median(rates["service"]), median(rates["raw"])
    report = {
        "benchmark": "booking_contention",
        "counted": "attempts per second of wall time (confirmed + refused), all threads "
        "released together after connecting; rates are the median over rounds, counts the sum",
        "threads": args.threads,
        "attempts_per_thread": args.attempts,
        "rounds": args.rounds,
        "attempts": args.threads * args.attempts * args.rounds,
        "rooms": [code for _, code in rooms],
        "days": args.days,
        "confirmed": service.confirmed,
        "conflicts": service.conflicts,
        "errors": service.errors,
        "double_bookings": doubles["service"],
        "schedule_version_drift": version_drift,
        "service_reservations_per_s": round(service_rate, 1),
        "service_reservations_per_s_by_round": [round(r) for r in rates["service"]],
        "raw_confirmed": raw.confirmed,
        "raw_conflicts": raw.conflicts,
        "raw_deadlocks": raw.deadlocks,
        "raw_errors": raw.errors,
        "raw_double_bookings": doubles["raw"],
        "raw_inserts_per_s": round(raw_rate, 1),
        "raw_inserts_per_s_by_round": [round(r) for r in rates["raw"]],
        "ratio_service_vs_raw": round(service_rate / raw_rate, 3),
        "error_samples": service.error_samples + raw.error_samples,
        "debug": settings.DEBUG,
        "python": platform.python_version(),
        "django": django.__version__,
        "psycopg": psycopg.__version__,
        "postgres": scalar("SHOW server_version"),
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(report))
    bad = service.errors + raw.errors + sum(doubles.values()) + abs(version_drift)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
