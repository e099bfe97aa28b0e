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


# --- every other write tool's "what happened under this key" ------------------------------------


def _series_arguments():
    start, end = slot(days=3, hour=9)
    return {
        "room_id": "R7",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "rrule": "FREQ=WEEKLY;COUNT=3",
        "attendees": 2,
        "mode": "all",
    }


def _change_setup(user) -> dict:
    from tests.bookings.factories import booking_create

    start, end = slot(days=3, hour=10)
    booking = booking_create(requester=user, room="R7", start_at=start, end_at=end)
    return {
        "booking_id": booking.code,
        "room_id": "R2",
        "expected_version": Room.objects.get(code="R2").schedule_version,
    }


def _cancel_series_setup(user) -> dict:
    from bookings.series import SeriesMode, series_reserve

    start, end = slot(days=3, hour=9)
    booked = series_reserve(
        user=user,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule="FREQ=WEEKLY;COUNT=3",
        attendees=2,
        mode=SeriesMode.ALL,
        idempotency_key="setup-series",
    )
    return {"series_id": booked.series.pk}


def _state() -> tuple:
    from bookings.models import BookingChange, BookingSeries, SeriesCancellation

    return (
        sorted(Booking.objects.values_list("code", "room__code", "during", "status")),
        BookingChange.objects.count(),
        BookingSeries.objects.count(),
        SeriesCancellation.objects.count(),
    )


@pytest.mark.parametrize(
    ("tool", "setup"),
    [
        ("change_booking", _change_setup),
        ("reserve_series", lambda user: _series_arguments()),
        ("cancel_series", _cancel_series_setup),
    ],
)
def test_each_write_tools_lost_answer_is_found_by_its_key_and_never_done_twice(
    worker, e17, monkeypatch, tool, setup
):
    """change_booking, reserve_series and cancel_series declare what happened under a key: a
    call whose write committed but whose answer was lost is settled from that lookup (found),
    the run ends reconciled, and a retry with the same key does nothing again."""
    arguments = setup(e17)
    spec = registry.get(tool)

    def commit_then_lose(ctx, args):
        spec.handler(ctx, args)
        raise LostReceiptError("injected: answer lost after the commit")

    monkeypatch.setitem(registry._TOOLS, tool, dataclasses.replace(spec, handler=commit_then_lose))
    before = _state()

    envelope = tool_call_governed(user=e17, name=tool, arguments=arguments, idempotency_key="k")

    assert (envelope["ok"], envelope["signal"]) == (False, "unknown_outcome"), envelope
    after = _state()
    assert after != before  # the write did commit
    run = wait_for_run(AgentRun.objects.order_by("-created_at").first().pk)
    assert (run.status, run.outcome) == ("succeeded", "reconciled"), run.reply
    lookup = run.events.get(kind="reconcile_lookup")
    assert lookup.payload["status"] == "found", lookup.payload

    monkeypatch.setitem(registry._TOOLS, tool, spec)
    retried = tool_call_governed(user=e17, name=tool, arguments=arguments, idempotency_key="k")
    assert retried["ok"], retried
    assert _state() == after  # nothing done twice
