"""A write that outlives its timeout is never left unseen: while its thread still runs, the
reconciler's lookup says "still running" (a proven "absent" could turn into "written" a moment
later) and nothing is retried; once the thread has ended, its receipt is found and taken."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from agentops.models import Action
from agentops.runtime import registry
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.invoke import inflight_key
from agentops.runtime.reconcile import STILL_RUNNING, action_reconcile, receipt_lookup
from agentops.runtime.redis_client import get_redis
from bookings.models import Booking, Room
from tests.conftest import slot
from tests.workers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


@pytest.fixture
def slow_reserve():
    """reserve_room that commits only after its caller has stopped waiting (0.3 s timeout)."""
    original = registry.get("reserve_room")
    go = threading.Event()

    def late(ctx, args):
        go.wait(10)
        return original.handler(ctx, args)

    spec = dataclasses.replace(
        original,
        name="reserve_slow",
        handler=late,
        meta=dataclasses.replace(original.meta, estimated_latency_ms=100),
    )
    registry.register(spec)
    get_redis().flushdb()
    yield spec.name, go
    go.set()
    registry.unregister(spec.name)


def test_a_timed_out_write_is_waited_for_then_its_receipt_taken(
    transactional_db, e17, slow_reserve
):
    name, go = slow_reserve
    start, end = slot(days=3, hour=15)
    answer = tool_call_governed(
        user=e17,
        name=name,
        arguments={
            "room_id": "R7",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "expected_version": Room.objects.get(code="R7").schedule_version,
        },
    )
    assert answer["signal"] == "unknown_outcome"
    action = Action.objects.get()
    key = action.idempotency_key

    # Its thread still runs: the lookup does not say "absent", and nothing is retried.
    assert get_redis().exists(inflight_key(key)) == 1
    assert receipt_lookup(action).detail == STILL_RUNNING
    action_reconcile(action.pk)
    action.refresh_from_db()
    assert (action.status, action.attempts) == ("unknown_outcome", 1)
    assert Booking.objects.count() == 0

    go.set()  # the late thread commits its booking, and its mark goes
    wait_until(lambda: not get_redis().exists(inflight_key(key)), message="the thread to end")
    action_reconcile(action.pk)

    action.refresh_from_db()
    booking = Booking.objects.get()
    assert action.status == "succeeded"
    assert action.result["data"]["booking_id"] == booking.code
