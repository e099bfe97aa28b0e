"""A tool that keeps failing is refused at once for a cool-down (its circuit opens), shown to
operators, and closes again after a success; an answer outside the tool's output model is
never passed on (a read's refused, a write's reconciled)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from agentops.models import Action, AgentRun
from agentops.runtime import registry
from agentops.runtime.circuit import circuits_open
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.redis_client import get_redis
from bookings.models import Booking, Room
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


@pytest.fixture(autouse=True)
def _circuit(settings):
    settings.TOOL_CIRCUIT_FAILURES = 3
    settings.TOOL_CIRCUIT_WINDOW_S = 30
    settings.TOOL_CIRCUIT_COOLDOWN_S = 2
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 1000
    get_redis().flushdb()
    yield
    get_redis().flushdb()


def _search() -> dict:
    start, end = slot(days=2)
    return {"start_at": start.isoformat(), "end_at": end.isoformat(), "attendees": 2}


@pytest.fixture
def failing_search():
    """find_available_rooms whose database is down: every call raises (a transient failure)."""
    calls = []

    def down(ctx, args):
        calls.append(1)
        raise ConnectionError("the database is down")

    spec = dataclasses.replace(
        registry.get("find_available_rooms"), name="search_down", handler=down
    )
    registry.register(spec)
    yield spec.name, calls
    registry.unregister(spec.name)


def test_after_repeated_failures_calls_are_refused_at_once_then_let_through(
    transactional_db, e17, failing_search
):
    name, calls = failing_search
    answers = [tool_call_governed(user=e17, name=name, arguments=_search()) for _ in range(5)]

    assert [a["code"] for a in answers[:3]] == ["tool_crashed"] * 3
    assert [a["code"] for a in answers[3:]] == ["circuit_open"] * 2
    assert all(a["signal"] == "yellow" and a["retry_after_ms"] > 0 for a in answers[3:])
    assert len(calls) == 3  # the open circuit ran nothing
    assert [c.tool for c in circuits_open()] == [name]

    time.sleep(2.1)  # the cool-down passes: the next call goes through (and fails again)
    assert tool_call_governed(user=e17, name=name, arguments=_search())["code"] == "tool_crashed"
    assert len(calls) == 4


def test_a_success_closes_the_circuit(transactional_db, e17, failing_search):
    name, _ = failing_search
    for _ in range(2):
        tool_call_governed(user=e17, name=name, arguments=_search())
    assert tool_call_governed(user=e17, name="find_available_rooms", arguments=_search())["ok"]
    assert get_redis().exists("agentops:circuit:failures:search_down") == 1  # per tool

    tool_call_governed(user=e17, name=name, arguments=_search())  # the third: opens it
    assert [c.tool for c in circuits_open()] == [name]
    assert circuits_open()[0].retry_after_s > 0


def test_a_read_answering_outside_its_output_model_is_refused(transactional_db, e17):
    spec = dataclasses.replace(
        registry.get("find_available_rooms"),
        name="search_off_model",
        handler=lambda ctx, args: {"ok": True, "signal": "green", "data": {"rooms": "all of them"}},
    )
    registry.register(spec)
    try:
        answer = tool_call_governed(user=e17, name=spec.name, arguments=_search())
    finally:
        registry.unregister(spec.name)

    assert (answer["signal"], answer["code"]) == ("red", "output_invalid")
    assert "all of them" not in str(answer)


def test_a_write_answering_outside_its_output_model_is_reconciled_from_its_receipt(worker, e17):
    original = registry.get("reserve_room")

    def booked_but_garbled(ctx, args):
        envelope = original.handler(ctx, args)  # the booking is really made
        return envelope | {"data": {"booking_id": 42}}

    spec = dataclasses.replace(original, name="reserve_garbled", handler=booked_but_garbled)
    registry.register(spec)
    start, end = slot(days=3, hour=9)
    try:
        answer = tool_call_governed(
            user=e17,
            name=spec.name,
            arguments={
                "room_id": "R7",
                "start_at": start.isoformat(),
                "end_at": end.isoformat(),
                "expected_version": Room.objects.get(code="R7").schedule_version,
            },
        )
        assert (answer["signal"], answer["code"]) == ("unknown_outcome", "unknown_outcome")
        from tests.workers import wait_for_run

        run = wait_for_run(AgentRun.objects.get().pk)
    finally:
        registry.unregister(spec.name)

    booking = Booking.objects.get()
    action = Action.objects.get()
    assert (run.status, run.outcome) == ("succeeded", "reconciled")
    assert action.result["data"]["booking_id"] == booking.code  # the receipt, not the garble


def test_operators_see_a_paused_tool_on_the_queue_page(transactional_db, e17, failing_search):
    from django.test import Client

    from tests.accounts.factories import EMPLOYEES, user_create

    name, _ = failing_search
    for _ in range(3):
        tool_call_governed(user=e17, name=name, arguments=_search())
    client = Client()
    client.force_login(user_create("o01", roles=[EMPLOYEES, "operators"]))

    page = client.get("/operators/queue/").content.decode()

    assert 'id="paused-tools"' in page
    assert f'data-tool="{name}"' in page


class _Counting:
    """The runtime's Redis client, with each round trip the circuit makes written down."""

    def __init__(self, redis):
        self._redis, self.trips = redis, []

    def pipeline(self, **kwargs):
        pipe = self._redis.pipeline(**kwargs)
        execute, trips = pipe.execute, self.trips

        def counted():
            trips.append([c[0][0] for c in pipe.command_stack])
            return execute()

        pipe.execute = counted
        return pipe

    def __getattr__(self, name):
        command = getattr(self._redis, name)
        return lambda *a, **k: (self.trips.append([name.upper()]), command(*a, **k))[1]


def test_a_healthy_call_costs_the_circuit_one_round_trip(transactional_db, e17, monkeypatch):
    from agentops.runtime import circuit

    counting = _Counting(get_redis())
    monkeypatch.setattr(circuit, "get_redis", lambda: counting)

    assert tool_call_governed(user=e17, name="find_available_rooms", arguments=_search())["ok"]

    assert counting.trips == [["PTTL", "EXISTS"]]  # before the call; nothing after a success


def test_a_success_after_counted_failures_clears_them(transactional_db, e17):
    calls = []
    original = registry.get("find_available_rooms")

    def flaky(ctx, args):
        calls.append(1)
        if len(calls) <= 2:
            raise ConnectionError("the database is down")
        return original.handler(ctx, args)

    spec = dataclasses.replace(original, name="search_flaky", handler=flaky)
    registry.register(spec)
    try:
        answers = [
            tool_call_governed(user=e17, name=spec.name, arguments=_search()) for _ in range(3)
        ]
        assert get_redis().exists("agentops:circuit:failures:search_flaky") == 0
        # two more failures would open it only if the earlier two still counted: they do not
        calls.clear()
        more = [tool_call_governed(user=e17, name=spec.name, arguments=_search()) for _ in range(2)]
    finally:
        registry.unregister(spec.name)

    assert [a.get("code") for a in answers[:2]] == ["tool_crashed"] * 2 and answers[2]["ok"]
    assert [a["code"] for a in more] == ["tool_crashed"] * 2
    assert circuits_open() == []


@pytest.fixture
def buggy_search():
    """find_available_rooms with a bug: every call raises KeyError (our code, not the tool's
    surroundings)."""
    calls = []

    def bug(ctx, args):
        calls.append(1)
        raise KeyError(42)

    spec = dataclasses.replace(registry.get("find_available_rooms"), name="search_bug", handler=bug)
    registry.register(spec)
    yield spec.name, calls
    registry.unregister(spec.name)


def test_crashes_of_our_own_code_never_open_the_circuit(transactional_db, e17, buggy_search):
    """A bug that some requests hit answers each of them as a crash, but does not pause the
    tool for everyone else: only infrastructure failures count."""
    name, calls = buggy_search
    answers = [tool_call_governed(user=e17, name=name, arguments=_search()) for _ in range(6)]

    assert [a["code"] for a in answers] == ["tool_crashed"] * 6
    assert len(calls) == 6
    assert circuits_open() == []


def test_an_open_circuit_shows_operators_its_cause(transactional_db, e17, failing_search):
    name, _calls = failing_search
    for _ in range(3):
        tool_call_governed(user=e17, name=name, arguments=_search())

    [opened] = circuits_open()
    assert opened.tool == name
    assert opened.cause.startswith("tool_crashed: ")
    assert "ConnectionError" in opened.cause
