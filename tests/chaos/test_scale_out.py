"""Scale-out: two web processes and two Celery worker processes against the same PostgreSQL and
Redis, the way the product grows past one machine. Employees start runs and call the write tool
directly through both web servers at once (some racing for one slot, some retrying with the
same Idempotency-Key on the other server), while one worker is SIGKILLed at a random moment
and comes back. The chaos invariants hold after every trial."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from accounts.services import token_issue
from agentops.models import AgentRun
from bookings.models import Booking, Room
from config.devservers import free_port
from tests.accounts.factories import user_create
from tests.chaos.conftest import trial_when
from tests.chaos.test_faults import booking_request
from tests.conftest import slot

pytestmark = [pytest.mark.chaos, pytest.mark.django_db(transaction=True)]


def call(port: int, token: str, path: str, body: Any, key: str | None = None) -> tuple[int, Any]:
    """As a client following the contract: a transient answer (yellow, or a 503 with
    Retry-After) is asked again, with the same Idempotency-Key, up to four times."""
    for _ in range(4):
        status, answer = call_once(port, token, path, body, key)
        transient = status == 503 or (isinstance(answer, dict) and answer.get("signal") == "yellow")
        if not transient:
            break
        wait = answer.get("retry_after_ms") if isinstance(answer, dict) else None
        time.sleep(min(2.0, (wait or 1000) / 1000))  # the answer's own retry delay
    return status, answer


def call_once(
    port: int, token: str, path: str, body: Any, key: str | None = None
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if key:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()[:300]


def all_at_once(calls: list[tuple]) -> list[tuple[int, Any]]:
    results: list[Any] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def go(i: int) -> None:
        barrier.wait(30)
        results[i] = call(*calls[i])

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


@pytest.fixture(autouse=True)
def _no_run_limit(settings):
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 100_000


def test_two_webs_and_two_workers_keep_the_invariants(stack, chaos, bookers):
    people = bookers + [user_create(f"e{40 + i}") for i in range(3)]
    tokens = [token_issue(user=p, name="chaos") for p in people]
    ports = [free_port(), free_port()]
    for i, port in enumerate(ports):
        stack.web(f"web{i}", port)
    stack.worker("wa", beat=True, concurrency=2)
    stack.worker("wb", concurrency=2)
    stack.wait_ready("wa")
    stack.wait_ready("wb")
    for n in range(chaos.trials):
        day, shift = trial_when(n, 30)
        calls = []
        for i, token in enumerate(tokens):
            start, end = slot(days=day, hour=8 + i + shift)
            body = {"request": booking_request(start, end)}
            calls.append((ports[i % 2], token, "/api/runs", body))
        start, end = slot(days=day, hour=17 + shift)
        race = {
            "room_id": "R9",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": 2,
            "expected_version": Room.objects.get(code="R9").schedule_version,
        }
        for i, token in enumerate(tokens[:4]):
            calls.append((ports[i % 2], token, "/api/tools/reserve_room", race))
        start, end = slot(days=day, hour=19 + shift)
        retried = race | {"room_id": "R5", "start_at": start.isoformat(), "end_at": end.isoformat()}
        retried["expected_version"] = Room.objects.get(code="R5").schedule_version
        # the same request retried on the other server, with the same key
        calls += [
            (port, tokens[0], "/api/tools/reserve_room", retried, f"retry-{n}") for port in ports
        ]

        killer = threading.Timer(chaos.rng.uniform(0, 1.5), stack.kill, args=("wb",))
        killer.start()
        results = all_at_once(calls)
        killer.join()
        stack.worker("wb", concurrency=2)

        statuses = [status for status, _ in results]
        assert set(statuses) <= {200, 202}, (chaos.seed, n, results)
        run_ids = [body["run_id"] for _, body in results[: len(tokens)]]
        chaos.check(
            n, list(AgentRun.objects.filter(pk__in=run_ids)), dict.fromkeys(run_ids, "succeeded")
        )
        raced = [body for _, body in results[len(tokens) : len(tokens) + 4]]
        assert sum(1 for b in raced if b.get("ok")) == 1, (chaos.seed, n, raced)
        assert {b.get("reason") for b in raced if not b.get("ok")} <= {"conflict"}, raced
        same = [body for _, body in results[len(tokens) + 4 :]]
        # The same key on both servers at once: one writes, the other answers in_progress (or
        # replays); asked once more, it replays the one booking.
        assert {b.get("reason") for b in same if not b.get("ok")} <= {"in_progress"}, same
        _, again = call(ports[1], tokens[0], "/api/tools/reserve_room", retried, f"retry-{n}")
        codes = {b["data"]["booking_id"] for b in [*same, again] if b.get("ok")}
        assert len(codes) == 1, (chaos.seed, n, same, again)
        assert Booking.objects.filter(idempotency_key__endswith=f":retry-{n}").count() == 1
