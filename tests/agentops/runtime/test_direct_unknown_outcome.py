"""A direct call (JSON API, screens, MCP) whose write commits but whose answer is lost goes
through the same unknown-outcome handling as a run's call: recorded before the write, the run
reconciling, the receipt found by key, and a retry with the same key replaying it."""

from __future__ import annotations

import dataclasses

import pytest

from agentops.contract import LostReceiptError
from agentops.models import Action, AgentRun, IdempotencyRecord
from agentops.runtime import registry
from agentops.runtime.direct import tool_call_governed
from bookings.models import Booking, Room
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


@pytest.fixture
def lost_answers(monkeypatch):
    """reserve_room commits its booking, then its answer is lost on the way back."""
    spec = registry.get("reserve_room")

    def commit_then_lose(ctx, args):
        spec.handler(ctx, args)
        raise LostReceiptError("injected: answer lost after the commit")

    monkeypatch.setitem(
        registry._TOOLS, "reserve_room", dataclasses.replace(spec, handler=commit_then_lose)
    )
    return spec


def _arguments():
    start, end = slot(days=3, hour=10)
    return {
        "room_id": "R7",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": 3,
        "expected_version": Room.objects.get(code="R7").schedule_version,
    }


def test_a_lost_answer_is_unknown_then_reconciled_from_the_receipt(worker, e17, lost_answers):
    arguments = _arguments()
    envelope = tool_call_governed(
        user=e17, name="reserve_room", arguments=arguments, idempotency_key="k1"
    )

    assert (envelope["ok"], envelope["signal"]) == (False, "unknown_outcome")
    booking = Booking.objects.get()  # the write did commit
    run = wait_for_run(AgentRun.objects.get().pk)
    assert (run.kind, run.status, run.outcome) == ("direct", "succeeded", "reconciled")
    action = Action.objects.get()
    assert action.status == "succeeded"
    assert action.result["data"]["booking_id"] == booking.code
    kinds = list(run.events.order_by("seq").values_list("kind", flat=True))
    assert kinds == [
        "gate",
        "execution_started",
        "execution_finished",
        "run_reconciling",
        "reconcile_lookup",
        "verified",  # the receipt found by its key holds in the database
        "run_finished",
    ]
    record = IdempotencyRecord.objects.get()
    assert record.status == "completed"

    # The client retries with the same key: the booking is replayed, not made twice.
    retried = tool_call_governed(
        user=e17, name="reserve_room", arguments=arguments, idempotency_key="k1"
    )
    assert retried["ok"]
    assert retried["data"]["booking_id"] == booking.code
    assert Booking.objects.count() == 1
