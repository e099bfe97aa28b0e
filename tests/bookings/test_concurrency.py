"""Reservations under real concurrency: real threads, each with its own PostgreSQL connection and
its own transactions, against the real exclusion constraint."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookings.errors import BookingError
from bookings.models import Booking, BookingStatus, Room
from bookings.services import Reservation, booking_cancel, booking_reserve
from tests.conftest import slot

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.usefixtures("rooms"),
]

JOIN_TIMEOUT = 60


def run_together(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in ``count`` threads released at once; return each result or exception.

    Each thread opens its own connection before the barrier (so the race is between the
    statements, not the connects) and closes it at the end.
    """
    barrier = threading.Barrier(count)
    outcomes: list[Any] = [None] * count

    def runner(i: int) -> None:
        try:
            connection.ensure_connection()
            barrier.wait(timeout=JOIN_TIMEOUT)
            outcomes[i] = work(i)
        except BaseException as exc:  # the test inspects every outcome
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=(i,), name=f"racer-{i}") for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a thread is still waiting (lock or barrier)"
    return outcomes


def version_of(room_code: str) -> int:
    return Room.objects.get(code=room_code).schedule_version


def successes(outcomes: list[Any]) -> list[Reservation]:
    return [o for o in outcomes if isinstance(o, Reservation)]


def failures(outcomes: list[Any]) -> list[BaseException]:
    return [o for o in outcomes if not isinstance(o, Reservation)]


def test_32_threads_reserving_overlapping_windows_confirm_exactly_one(e17, e23):
    users = [e17, e23]
    start, _ = slot(days=3, hour=14)
    before = version_of("R7")

    def reserve(i: int) -> Reservation:
        # Every window overlaps every other: they all start within the first one's hour.
        begin = start + timedelta(minutes=i)
        return booking_reserve(
            user=users[i % 2],
            room_code="R7",
            start_at=begin,
            end_at=begin + timedelta(hours=1),
            attendees=3,
            idempotency_key=f"overlap-{i}",
        )

    outcomes = run_together(32, reserve)

    assert len(successes(outcomes)) == 1
    refused = failures(outcomes)
    assert len(refused) == 31
    assert all(isinstance(e, BookingError) for e in refused), refused
    assert {(e.reason, e.code) for e in refused} == {("conflict", "slot_taken")}
    assert Booking.objects.count() == 1
    assert Booking.objects.get().code == successes(outcomes)[0].booking.code
    assert version_of("R7") == before + 1 == successes(outcomes)[0].schedule_version


def test_threads_with_a_version_made_stale_in_their_window_are_all_refused(e17, e23):
    """A rival booking lands in the observed window after the observation: every concurrent
    write that carries the old version and touches that window is refused, nothing written."""
    users = [e17, e23]
    start, _ = slot(days=3, hour=8)
    expected = version_of("R7")
    booking_reserve(
        user=e23,
        room_code="R7",
        start_at=start,
        end_at=start + timedelta(hours=4),
        attendees=2,
        idempotency_key="rival",
    )

    def reserve(i: int) -> Reservation:
        begin = start + timedelta(
            minutes=15 * i
        )  # disjoint from each other, all inside the rival's
        return booking_reserve(
            user=users[i % 2],
            room_code="R7",
            start_at=begin,
            end_at=begin + timedelta(minutes=15),
            attendees=2,
            expected_version=expected,
            idempotency_key=f"stale-{i}",
        )

    outcomes = run_together(16, reserve)

    assert successes(outcomes) == []
    assert {(e.reason, e.code) for e in failures(outcomes)} == {("conflict", "stale_version")}
    assert Booking.objects.count() == 1
    assert version_of("R7") == expected + 1


def test_threads_sharing_a_version_for_disjoint_windows_all_confirm(e17, e23):
    """The version is judged per window: writes to other times of the room are not conflicts."""
    users = [e17, e23]
    start, _ = slot(days=3, hour=8)
    expected = version_of("R7")

    def reserve(i: int) -> Reservation:
        begin = start + timedelta(minutes=30 * i)
        return booking_reserve(
            user=users[i % 2],
            room_code="R7",
            start_at=begin,
            end_at=begin + timedelta(minutes=30),
            attendees=2,
            expected_version=expected,
            idempotency_key=f"fresh-{i}",
        )

    outcomes = run_together(16, reserve)

    assert len(successes(outcomes)) == 16, failures(outcomes)
    assert Booking.objects.count() == 16
    assert version_of("R7") == expected + 16
    assert sorted(r.schedule_version for r in successes(outcomes)) == list(
        range(expected + 1, expected + 17)
    )


def test_same_idempotency_key_from_16_threads_creates_one_booking(e17):
    start, end = slot(days=3, hour=10)
    before = version_of("R7")

    def reserve(_: int) -> Reservation:
        return booking_reserve(
            user=e17,
            room_code="R7",
            start_at=start,
            end_at=end,
            attendees=3,
            idempotency_key="one-request-many-retries",
        )

    outcomes = run_together(16, reserve)

    assert not failures(outcomes), failures(outcomes)
    assert Booking.objects.count() == 1
    assert {r.booking.code for r in outcomes} == {Booking.objects.get().code}
    assert sorted(r.replayed for r in outcomes) == [False] + [True] * 15
    assert version_of("R7") == before + 1


# --- random interleavings of reserves and cancels --------------------------------------------

ROOMS = ("R7", "R9")
QUARTERS = 40  # 08:00-18:00 on a 15-minute grid
BATCH = 4


@dataclass(frozen=True)
class Reserve:
    room: str
    first_quarter: int
    quarters: int
    user: int  # index into the users fixture list


@dataclass(frozen=True)
class Cancel:
    pick: int  # which booking confirmed in an earlier batch, modulo their number


@dataclass
class Ledger:
    """What the threads were told, to be compared with what the database holds."""

    reserved: dict[str, tuple[str, datetime, datetime]] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    refused: list[tuple[str, datetime, datetime]] = field(default_factory=list)


reserve_ops = st.builds(
    Reserve,
    room=st.sampled_from(ROOMS),
    first_quarter=st.integers(0, QUARTERS - 1),
    quarters=st.integers(1, 8),
    user=st.integers(0, 1),
)
operations = st.lists(
    st.one_of(reserve_ops, reserve_ops, st.builds(Cancel, pick=st.integers(0, 1_000))),
    min_size=1,
    max_size=24,
)


class Workers:
    """A few long-lived threads, each with its own connection, that run one batch at a time."""

    def __init__(self, count: int) -> None:
        self.inboxes: list[queue.Queue] = [queue.Queue() for _ in range(count)]
        self.outbox: queue.Queue = queue.Queue()
        self.threads = [
            threading.Thread(target=self._loop, args=(i,), name=f"worker-{i}", daemon=True)
            for i in range(count)
        ]
        for t in self.threads:
            t.start()

    def _loop(self, i: int) -> None:
        try:
            while (job := self.inboxes[i].get()) is not None:
                barrier, fn = job
                try:
                    barrier.wait(timeout=JOIN_TIMEOUT)
                    result = fn()
                except BaseException as exc:  # reported to the test thread
                    result = exc
                self.outbox.put((i, result))
        finally:
            connection.close()

    def run(self, jobs: list[Callable[[], Any]]) -> list[Any]:
        """Start ``jobs`` together, one per worker; return their results in order."""
        barrier = threading.Barrier(len(jobs))
        for i, job in enumerate(jobs):
            self.inboxes[i].put((barrier, job))
        results: list[Any] = [None] * len(jobs)
        for _ in jobs:
            i, result = self.outbox.get(timeout=JOIN_TIMEOUT)
            results[i] = result
        return results

    def stop(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for t in self.threads:
            t.join(JOIN_TIMEOUT)
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"still running after {JOIN_TIMEOUT}s: {alive}"


@pytest.fixture
def workers():
    pool = Workers(BATCH)
    yield pool
    pool.stop()  # before pytest-django flushes the database


def window(op: Reserve) -> tuple[datetime, datetime]:
    day_start, _ = slot(days=4, hour=8)
    start = day_start + timedelta(minutes=15 * op.first_quarter)
    return start, start + timedelta(minutes=15 * op.quarters)


def overlapping_confirmed_pairs() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*)
              FROM bookings_booking a
              JOIN bookings_booking b
                ON a.room_id = b.room_id AND a.id < b.id AND a.during && b.during
             WHERE a.status = 'confirmed' AND b.status = 'confirmed'
            """
        )
        return cursor.fetchone()[0]


def versions_by_room() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT code, schedule_version FROM bookings_room WHERE code = ANY(%s)", [list(ROOMS)]
        )
        return dict(cursor.fetchall())


@settings(
    max_examples=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_random_reserve_cancel_interleavings_never_double_book(workers, e17, e23, ops):
    users = [e17, e23]
    Booking.objects.all().delete()
    Room.objects.update(schedule_version=0)
    ledger = Ledger()

    def reserve_job(op: Reserve) -> Callable[[], Any]:
        start, end = window(op)
        return lambda: booking_reserve(
            user=users[op.user],
            room_code=op.room,
            start_at=start,
            end_at=end,
            attendees=3,
            idempotency_key=str(uuid.uuid4()),
        )

    for batch_start in range(0, len(ops), BATCH):
        known = list(ledger.reserved)  # bookings confirmed by earlier batches
        entries: list[tuple[Reserve | str, Callable[[], Any]]] = []
        for op in ops[batch_start : batch_start + BATCH]:
            if isinstance(op, Reserve):
                entries.append((op, reserve_job(op)))
            elif known:
                code = known[op.pick % len(known)]
                owner = Booking.objects.get(code=code).requester
                entries.append(
                    (code, lambda c=code, u=owner: booking_cancel(user=u, booking_code=c))
                )
        # Cancels race reserves of the same room too (they used to deadlock, see below).
        results = workers.run([job for _, job in entries]) if entries else []

        for (op, _), result in zip(entries, results, strict=True):
            if isinstance(op, Reserve):
                start, end = window(op)
                if isinstance(result, Reservation):
                    ledger.reserved[result.booking.code] = (op.room, start, end)
                    continue
                assert isinstance(result, BookingError), repr(result)
                assert (result.reason, result.code) == ("conflict", "slot_taken"), result
                ledger.refused.append((op.room, start, end))
            else:
                assert isinstance(result, Booking), repr(result)
                assert (result.code, result.status) == (op, BookingStatus.CANCELLED)
                ledger.cancelled.add(op)

    assert overlapping_confirmed_pairs() == 0
    rows = {b.code: b for b in Booking.objects.select_related("room")}
    assert set(rows) == set(ledger.reserved)
    assert {c for c, b in rows.items() if b.status == BookingStatus.CANCELLED} == ledger.cancelled
    touches = dict.fromkeys(ROOMS, 0)
    for code, (room, _, _) in ledger.reserved.items():
        touches[room] += 1 + (code in ledger.cancelled)
    assert versions_by_room() == touches
    # A refusal needs a booking it overlaps, confirmed at least for a while.
    for room, start, end in ledger.refused:
        assert any(r == room and s < end and start < e for r, s, e in ledger.reserved.values())


def lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def wait_for_lock_waiters(count: int, outcomes: dict[str, Any]) -> None:
    deadline = time.monotonic() + 10
    while lock_waiters() < count:
        assert time.monotonic() < deadline, f"never saw {count} sessions wait on a lock: {outcomes}"
        time.sleep(0.01)


def in_thread(outcomes: dict[str, Any], name: str, fn: Callable[[], Any]) -> threading.Thread:
    def runner() -> None:
        try:
            outcomes[name] = fn()
        except BaseException as exc:  # the test inspects it
            outcomes[name] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=runner, name=name)
    thread.start()
    return thread


def test_cancel_racing_a_reserve_of_the_same_slot_does_not_deadlock(e17, e23):
    start, end = slot(days=3, hour=16)
    first = booking_reserve(
        user=e17, room_code="R7", start_at=start, end_at=end, attendees=3, idempotency_key="first"
    )
    locked, release = threading.Event(), threading.Event()
    outcomes: dict[str, Any] = {}

    def hold_room_lock() -> None:
        # Queue the reserve and then the cancel behind one room lock, so that the reserve is
        # let through first, exactly as a busy room would order them.
        with transaction.atomic():
            Room.objects.select_for_update().get(code="R7")
            locked.set()
            release.wait(JOIN_TIMEOUT)

    threads = [in_thread(outcomes, "locker", hold_room_lock)]
    try:
        assert locked.wait(JOIN_TIMEOUT)
        threads.append(
            in_thread(
                outcomes,
                "reserve",
                lambda: booking_reserve(
                    user=e23,
                    room_code="R7",
                    start_at=start,
                    end_at=end,
                    attendees=3,
                    idempotency_key="second",
                ),
            )
        )
        wait_for_lock_waiters(1, outcomes)
        threads.append(
            in_thread(
                outcomes,
                "cancel",
                lambda: booking_cancel(user=e17, booking_code=first.booking.code),
            )
        )
        wait_for_lock_waiters(2, outcomes)
    finally:
        release.set()
        for t in threads:
            t.join(JOIN_TIMEOUT)

    assert isinstance(outcomes["cancel"], Booking), repr(outcomes["cancel"])
    assert isinstance(outcomes["reserve"], (Reservation, BookingError)), repr(outcomes["reserve"])
    assert overlapping_confirmed_pairs() == 0


def test_reserve_queued_behind_a_cancel_of_its_window_is_refused_as_stale(e17, e23):
    """Serially, a cancel in the window after the observed version makes the version stale.
    The same must hold when the reserve was already waiting for the room while the cancel ran."""
    start, end = slot(days=3, hour=11)
    first = booking_reserve(
        user=e17, room_code="R7", start_at=start, end_at=end, attendees=3, idempotency_key="first"
    )
    observed = version_of("R7")
    cancelled, release = threading.Event(), threading.Event()
    outcomes: dict[str, Any] = {}

    def cancel_and_hold() -> Booking:
        with transaction.atomic():  # the cancel commits only when the test lets it
            booking = booking_cancel(user=e17, booking_code=first.booking.code)
            cancelled.set()
            release.wait(JOIN_TIMEOUT)
        return booking

    threads = [in_thread(outcomes, "cancel", cancel_and_hold)]
    try:
        assert cancelled.wait(JOIN_TIMEOUT)
        threads.append(
            in_thread(
                outcomes,
                "reserve",
                lambda: booking_reserve(
                    user=e23,
                    room_code="R7",
                    start_at=start,
                    end_at=end,
                    attendees=3,
                    expected_version=observed,
                    idempotency_key="second",
                ),
            )
        )
        wait_for_lock_waiters(1, outcomes)
    finally:
        release.set()
        for t in threads:
            t.join(JOIN_TIMEOUT)

    assert isinstance(outcomes["cancel"], Booking), repr(outcomes["cancel"])
    refused = outcomes["reserve"]
    assert isinstance(refused, BookingError), repr(refused)
    assert (refused.reason, refused.code) == ("conflict", "stale_version")
