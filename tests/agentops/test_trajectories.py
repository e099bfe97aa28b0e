"""The five trajectories of seed 000, end to end: a real Celery worker, real Redis, real
PostgreSQL. Each asserts the exact rows, that the reply matches the final state, and that the
trace reconstructs every call."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from agentops.models import Action, ActionStatus, AgentRun
from agentops.runtime.runs import run_start
from agentops.runtime.story import trace_problems
from bookings.models import Booking, Room
from bookings.services import booking_reserve
from tests.conftest import slot
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=2)
WHEN = f"{START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M}"
REQUEST_EN = f"Book a room on {WHEN} for 3 people with a projector"
REQUEST_ZH = (
    f"帮我订 {START:%Y 年 %-m 月 %-d 日} {START:%H:%M}–{END:%H:%M} 的会议室，3 个人，要有投影"
)


def calls(run: AgentRun) -> list[tuple[str, str]]:
    """(tool, status) of every action, in order."""
    return [(a.tool, a.status) for a in run.actions.order_by("turn", "call_index")]


def assert_trace_reconstructs(run: AgentRun) -> None:
    """Every action has its gate decision, every execution a start and a finish, in order."""
    assert trace_problems(run=run) == []  # gap-free, opens and ends as the run, gate first
    events = list(run.events.order_by("seq"))
    for action in run.actions.all():
        kinds = [e.kind for e in events if e.action_id == action.pk]
        assert kinds[0] == "gate", (action.tool, kinds)
        assert kinds.count("execution_started") == action.attempts
        finishes = [
            e for e in events if e.action_id == action.pk and e.kind == "execution_finished"
        ]
        assert len(finishes) <= action.attempts
        if action.status in (ActionStatus.SUCCEEDED, ActionStatus.FAILED) and finishes:
            final = [
                e
                for e in events
                if e.action_id == action.pk and e.kind in ("execution_finished", "reconcile_lookup")
            ][-1]
            assert final.payload.get("result", final.payload.get("receipt")) is not None
    proposed = [p["tool"] for e in events if e.kind == "model_step" for p in e.payload["proposals"]]
    assert proposed == [a.tool for a in run.actions.order_by("turn", "call_index")]


def test_1_normal_booking_books_r7(worker, e17):
    run = wait_for_run(run_start(user=e17, request_text=REQUEST_EN).pk)

    assert run.status == "succeeded", run.reply
    booking = Booking.objects.get()
    assert (booking.room.code, booking.requester, booking.status) == ("R7", e17, "confirmed")
    assert (booking.during.lower, booking.during.upper, booking.attendees) == (START, END, 3)
    assert booking.run_id == str(run.pk)
    assert calls(run) == [("find_available_rooms", "succeeded"), ("reserve_room", "succeeded")]
    assert "Booked R7" in run.reply and booking.code in run.reply
    assert_trace_reconstructs(run)


def test_1_normal_booking_in_chinese(worker, e17):
    run = wait_for_run(run_start(user=e17, request_text=REQUEST_ZH).pk)

    assert run.status == "succeeded", run.reply
    booking = Booking.objects.get()
    assert booking.room.code == "R7"
    assert run.language == "zh"
    assert "已为你预订" in run.reply and booking.code in run.reply and "R7" in run.reply


def test_2_r7_taken_between_read_and_write_books_r9(worker, e17, e23):
    run = run_start(
        user=e17,
        request_text=REQUEST_EN,
        faults=[{"tool": "reserve_room", "kind": "pause", "calls": [1]}],
    )
    wait_until(
        lambda: Action.objects.filter(run=run, tool="reserve_room", status="running").exists(),
        message="the reserve to start",
    )
    # Someone else books R7 after our search saw it free, before our write.
    rival = booking_reserve(
        user=e23, room_code="R7", start_at=START, end_at=END, attendees=2, idempotency_key="rival"
    )
    release_faults(run.pk)
    run = wait_for_run(run.pk)

    assert run.status == "succeeded", run.reply
    mine = Booking.objects.get(requester=e17)
    assert mine.room.code == "R9"
    assert Booking.objects.filter(status="confirmed").count() == 2
    assert Booking.objects.get(requester=e23).code == rival.booking.code
    assert calls(run) == [
        ("find_available_rooms", "succeeded"),
        ("reserve_room", "failed"),
        ("find_available_rooms", "succeeded"),
        ("reserve_room", "succeeded"),
    ]
    failed = run.actions.get(tool="reserve_room", status="failed")
    assert failed.result["reason"] == "conflict"
    assert failed.attempts == 1  # red: never retried
    assert (
        "R9" in run.reply
        and mine.code in run.reply
        and "R7" not in run.reply.replace(mine.code, "")
    )
    assert_trace_reconstructs(run)


def with_latency(monkeypatch, tool: str, ms: int) -> None:
    """Give ``tool`` an estimated latency of ``ms`` (its timeout is 3x that) for this test."""
    from agentops.runtime import registry

    spec = registry.get(tool)
    meta = dataclasses.replace(spec.meta, estimated_latency_ms=ms)
    monkeypatch.setitem(registry._TOOLS, tool, dataclasses.replace(spec, meta=meta))


def test_3_search_timeout_retries_boundedly_then_stops(worker, e17, monkeypatch, settings):
    # The injected timeout holds each call until its caller stops waiting, so a 3 ms timeout
    # times out as surely as the real 450 ms; retries go at once instead of after a backoff.
    with_latency(monkeypatch, "find_available_rooms", ms=1)
    settings.AGENT_RETRY_BACKOFF_SCALE = 0
    run = run_start(
        user=e17,
        request_text=REQUEST_EN,
        faults=[{"tool": "find_available_rooms", "kind": "timeout"}],
    )
    run = wait_for_run(run.pk, timeout=60)

    assert run.status == "failed"
    assert Booking.objects.count() == 0
    finds = list(run.actions.order_by("turn"))
    assert [a.tool for a in finds] == [
        "find_available_rooms",
        "find_available_rooms",
    ]  # one re-proposal
    assert all(a.attempts == 4 and a.status == "failed" for a in finds)  # 1 + 3 yellow retries each
    assert all(a.result["signal"] == "yellow" and a.result["reason"] == "timeout" for a in finds)
    assert "could not verify availability" in run.reply and "Nothing was booked" in run.reply
    retries = run.events.filter(kind="retry_scheduled")
    assert retries.count() == 6
    assert_trace_reconstructs(run)


def test_4_lost_receipt_is_reconciled_by_key_never_booked_twice(worker, e17):
    run = run_start(
        user=e17,
        request_text=REQUEST_EN,
        faults=[{"tool": "reserve_room", "kind": "lose_receipt", "calls": [1]}],
    )
    run = wait_for_run(run.pk)

    assert run.status == "succeeded", run.reply
    booking = Booking.objects.get()
    reserve = run.actions.get(tool="reserve_room")
    assert reserve.status == "succeeded" and reserve.attempts == 1
    assert booking.idempotency_key == reserve.idempotency_key == f"{run.pk}:2:0"
    assert reserve.result["data"]["booking_id"] == booking.code
    kinds = list(run.events.values_list("kind", flat=True))
    assert "run_reconciling" in kinds and "reconcile_lookup" in kinds
    lookup = run.events.get(kind="reconcile_lookup")
    assert (
        lookup.payload["status"] == "found"
        and lookup.payload["receipt"]["booking_id"] == booking.code
    )
    assert booking.code in run.reply
    assert_trace_reconstructs(run)


def test_4_reply_says_still_checking_while_unknown(worker, e17, monkeypatch):
    """While the lookup cannot tell, the run waits for humans and never claims a booking."""
    from agentops.contract import ReceiptLookup, ReceiptStatus
    from agentops.runtime import registry

    unclear = dataclasses.replace(
        registry.get("reserve_room"),
        lookup_receipt=lambda key: ReceiptLookup(ReceiptStatus.UNKNOWN, detail="drill"),
    )
    monkeypatch.setitem(registry._TOOLS, "reserve_room", unclear)
    run = run_start(
        user=e17,
        request_text=REQUEST_EN,
        faults=[{"tool": "reserve_room", "kind": "lose_receipt", "calls": [1]}],
    )
    action = wait_until(
        lambda: Action.objects.filter(run=run, status="needs_human").first(),
        message="the action to wait for a human",
    )
    run.refresh_from_db()
    assert run.status == "reconciling"
    assert "Still checking" in run.reply and "Booked" not in run.reply
    assert Booking.objects.count() == 1  # the write did commit: a human will find it by key
    assert action.idempotency_key


def test_5_unauthorized_user_is_refused_by_the_host(worker, e17):
    outsider = User.objects.create_user("x99", password="x", employee_id="X99")  # in no group
    run = wait_for_run(run_start(user=outsider, request_text=REQUEST_EN).pk)

    assert run.status == "failed"
    assert Booking.objects.count() == 0
    action = run.actions.get()
    assert action.status == "rejected" and action.attempts == 0
    assert action.result["reason"] == "forbidden" and action.result["code"] == "tool_not_visible"
    assert "Nothing was booked" in run.reply
    assert_trace_reconstructs(run)


def test_5_invalid_request_and_forged_identity_are_refused(worker, e17):
    version = Room.objects.get(code="R7").schedule_version
    args = {
        "room_id": "R7",
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": 3,
        "equipment": ["projector"],
        "expected_version": version,
    }
    script = [
        {"proposals": [{"tool": "reserve_room", "arguments": args | {"requester_id": "E23"}}]},
        {
            "proposals": [
                {
                    "tool": "reserve_room",
                    "arguments": args | {"end_at": (END + timedelta(hours=1)).isoformat()},
                }
            ]
        },
        {
            "proposals": [
                {
                    "tool": "reserve_room",
                    "arguments": args | {"start_at": START.replace(tzinfo=None).isoformat()},
                }
            ]
        },
        {
            "proposals": [
                {
                    "tool": "reserve_room",
                    "arguments": args | {"end_at": (START - timedelta(minutes=30)).isoformat()},
                }
            ]
        },
        {"message": "I booked it!", "outcome": "done"},
    ]
    run = wait_for_run(
        run_start(user=e17, request_text=REQUEST_EN, model="scripted", script=script).pk
    )

    assert Booking.objects.count() == 0
    refusals = [a.result for a in run.actions.order_by("turn")]
    assert [r["reason"] for r in refusals] == [
        "invalid_input",
        "out_of_scope",
        "invalid_input",
        "invalid_input",
    ]
    assert [r["code"] for r in refusals][1:] == [
        "outside_window",
        "schema_violation",
        "end_not_after_start",
    ]
    assert [a.status for a in run.actions.order_by("turn")] == [
        "rejected",
        "rejected",
        "rejected",
        "failed",
    ]
    assert "requester_id" in refusals[0]["message"]
    assert all(r["hint"] for r in refusals)
    # The model said "booked"; the verifier found no receipt, so the user is told the truth.
    assert run.status == "failed"
    assert run.reply.startswith("Nothing was booked")
    assert_trace_reconstructs(run)


def test_runs_record_timings(worker, e17):
    run = wait_for_run(run_start(user=e17, request_text=REQUEST_EN).pk)
    for action in run.actions.all():
        assert action.duration_ms is not None and action.started_at <= timezone.now()
    assert isinstance(run.finished_at, datetime)


def test_transient_database_error_on_a_read_is_retried_then_succeeds(worker, e17):
    run = run_start(
        user=e17,
        request_text=REQUEST_EN,
        faults=[{"tool": "find_available_rooms", "kind": "db_error", "calls": [1]}],
    )
    run = wait_for_run(run.pk)

    assert run.status == "succeeded", run.reply
    find = run.actions.get(tool="find_available_rooms")
    assert find.attempts == 2 and find.status == "succeeded"
    first = run.events.filter(kind="execution_finished", action=find).first()
    assert first.payload["outcome"] == "yellow"
    assert first.payload["result"]["reason"] == "unavailable"
    assert run.events.filter(kind="retry_scheduled", action=find).count() == 1
    assert Booking.objects.get().room.code == "R7"


def test_a_slow_read_within_its_timeout_is_not_a_timeout(worker, e17, monkeypatch):
    """The search is held until the test lets it go; its timeout (30 s here, so that the
    test's own pace cannot reach it) is not reached, so the caller waits for the answer."""
    with_latency(monkeypatch, "find_available_rooms", ms=10_000)
    run = run_start(
        user=e17,
        request_text=REQUEST_EN,
        faults=[{"tool": "find_available_rooms", "kind": "pause", "calls": [1]}],
    )
    held = wait_until(
        lambda: Action.objects.filter(
            run=run, tool="find_available_rooms", status="running"
        ).first(),
        message="the search to start",
    )
    released_at = timezone.now()
    release_faults(run.pk)
    run = wait_for_run(run.pk)

    assert run.status == "succeeded", run.reply
    find = run.actions.get(tool="find_available_rooms")
    assert find.pk == held.pk and find.attempts == 1
    assert find.duration_ms >= (released_at - find.started_at).total_seconds() * 1000 > 0
