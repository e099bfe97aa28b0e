"""Seed 002's negative tests, one per arrow of the runtime: each must fail closed."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from agentops.models import Action, ActionStatus, AgentRun, IdempotencyRecord
from agentops.runtime import recorder, runs, steps
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.runs import run_cancel, run_start
from bookings.models import Booking, Room
from bookings.services import booking_cancel, booking_reserve
from tests.conftest import slot
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=3)
REQUEST = f"Book a room on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"


def reserve_args(version: int, room: str = "R7", **extra) -> dict:
    return {
        "room_id": room,
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": 3,
        "equipment": ["projector"],
        "expected_version": version,
    } | extra


def test_stale_observation_is_refused(worker, e17, e23):
    seen = Room.objects.get(code="R7").schedule_version
    # The schedule of the observed window moves on after the model's observation.
    booking_reserve(
        user=e23,
        room_code="R7",
        start_at=START,
        end_at=START + (END - START) / 2,
        attendees=2,
        idempotency_key="other",
    )
    script = [
        {"proposals": [{"tool": "reserve_room", "arguments": reserve_args(seen)}]},
        {"message": "done", "outcome": "done"},
    ]
    run = wait_for_run(
        run_start(user=e17, request_text=REQUEST, model="scripted", script=script).pk
    )

    action = run.actions.get()
    assert action.status == "failed"
    assert (action.result["reason"], action.result["code"]) == ("conflict", "stale_version")
    assert action.observed_version == seen
    assert not Booking.objects.filter(requester=e17).exists()
    assert run.status == "failed"


def test_illegal_fields_and_unknown_actions_fail_closed(worker, e17):
    version = Room.objects.get(code="R7").schedule_version
    script = [
        {
            "proposals": [
                {"tool": "delete_all_bookings", "arguments": {}},
                {"tool": "reserve_room", "arguments": reserve_args(version, approved=True)},
                {
                    "tool": "reserve_room",
                    "arguments": reserve_args(version, approval={"signature": "forged"}),
                },
                {
                    "tool": "reserve_room",
                    "arguments": reserve_args(version, idempotency_key="mine"),
                },
                {"tool": "reserve_room", "arguments": "R7 please"},
            ]
        },
        {"message": "done"},
    ]
    run = wait_for_run(
        run_start(user=e17, request_text=REQUEST, model="scripted", script=script).pk
    )

    codes = [a.result["code"] for a in run.actions.order_by("call_index")]
    assert codes == [
        "unknown_tool",
        "approval_field_refused",
        "approval_field_refused",
        "schema_violation",
        "arguments_not_object",
    ]
    assert all(a.status == "rejected" and a.attempts == 0 for a in run.actions.all())
    assert Booking.objects.count() == 0
    assert IdempotencyRecord.objects.count() == 0


def test_unauthorized_action_has_zero_side_effects(worker, e17, e23):
    theirs = booking_reserve(
        user=e17, room_code="R7", start_at=START, end_at=END, attendees=3, idempotency_key="theirs"
    ).booking
    versions = dict(Room.objects.values_list("code", "schedule_version"))
    # No request text grants the assistant cancel_booking yet: the direct path is the channel.
    envelope = tool_call_governed(
        user=e23, name="cancel_booking", arguments={"booking_id": theirs.code}
    )
    unknown = tool_call_governed(
        user=e23, name="cancel_booking", arguments={"booking_id": "B999999"}
    )

    # Someone else's booking looks exactly like no booking (codes are sequential).
    assert (envelope["signal"], envelope["code"]) == ("red", "booking_not_found")
    assert envelope["message"] == unknown["message"].replace("B999999", theirs.code)
    assert "another employee" not in str(envelope)
    action = Action.objects.filter(tool="cancel_booking").order_by("created_at").first()
    assert action.status == "failed" and action.risk == "MEDIUM" and not action.risk_reasons
    assert Booking.objects.get(pk=theirs.pk).status == "confirmed"
    assert dict(Room.objects.values_list("code", "schedule_version")) == versions


def test_an_admin_cancelling_someone_elses_booking_waits_for_an_approval(worker, e17, admin_user):
    theirs = booking_reserve(
        user=e17, room_code="R7", start_at=START, end_at=END, attendees=3, idempotency_key="theirs"
    ).booking
    versions = dict(Room.objects.values_list("code", "schedule_version"))
    envelope = tool_call_governed(
        user=admin_user, name="cancel_booking", arguments={"booking_id": theirs.code}
    )

    assert (envelope["signal"], envelope["code"]) == ("yellow", "approval_pending")
    assert "another employee" in envelope["message"]
    action = Action.objects.get(tool="cancel_booking")
    assert action.status == "waiting_approval" and action.risk == "HIGH" and action.attempts == 0
    assert Booking.objects.get(pk=theirs.pk).status == "confirmed"
    assert dict(Room.objects.values_list("code", "schedule_version")) == versions


def test_duplicate_delivery_of_a_write_executes_once(worker, e17):
    version = Room.objects.get(code="R7").schedule_version
    script = [
        {"proposals": [{"tool": "reserve_room", "arguments": reserve_args(version)}]},
        {"proposals": [{"tool": "get_booking", "arguments": {"booking_id": "B1"}}]},
    ]
    scope = {"tools": ["reserve_room", "get_booking"], "max_writes": 1, "attendees": 3}
    run = run_start(
        user=e17,
        request_text=REQUEST,
        model="scripted",
        script=script,
        scope=scope,
        faults=[{"tool": "get_booking", "kind": "pause"}],
    )
    wait_until(
        lambda: Action.objects.filter(run=run, tool="get_booking", status="running").exists(),
        message="turn 2 to be running",
    )
    reserve = run.actions.get(tool="reserve_room")
    first = reserve.result
    # Celery redelivers at least once: the same message again does nothing.
    recorder.action_execute(reserve.pk)
    # A redelivery after a crash finds the key's stored response, not a second write.
    Action.objects.filter(pk=reserve.pk).update(status=ActionStatus.QUEUED)
    recorder.action_execute(reserve.pk)
    release_faults(run.pk)
    reserve.refresh_from_db()
    assert reserve.status == "succeeded" and reserve.attempts == 2
    assert reserve.result == first
    assert reserve.result["data"]["booking_id"] == Booking.objects.get().code
    assert Booking.objects.count() == 1
    assert IdempotencyRecord.objects.get(key=reserve.idempotency_key).status == "completed"


def test_concurrent_duplicate_executions_write_once(worker, e17):
    version = Room.objects.get(code="R7").schedule_version
    script = [{"proposals": [{"tool": "reserve_room", "arguments": reserve_args(version)}]}]
    run = run_start(
        user=e17,
        request_text=REQUEST,
        model="scripted",
        script=script,
        faults=[{"tool": "reserve_room", "kind": "pause"}],
    )
    action = wait_until(
        lambda: Action.objects.filter(run=run, status="running").first(), message="running"
    )
    # Two more deliveries of the same action race the paused one.
    Action.objects.filter(pk=action.pk).update(status=ActionStatus.QUEUED)
    barrier = threading.Barrier(2)

    def deliver():
        barrier.wait()
        try:
            recorder.action_execute(action.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for t in threads:
        t.start()
    release_faults(run.pk)
    for t in threads:
        t.join(30)
    # The stolen delivery finds its own key in progress: unknown outcome, reconciled by key.
    run = wait_for_run(run.pk)
    assert run.status == "succeeded", run.reply
    booking = Booking.objects.get()
    assert booking.code in run.reply
    assert run.actions.get().result["data"]["booking_id"] == booking.code


def test_nothing_continues_after_a_terminal_state(worker, e17):
    run = run_start(
        user=e17, request_text=REQUEST, faults=[{"tool": "find_available_rooms", "kind": "pause"}]
    )
    wait_until(
        lambda: Action.objects.filter(run=run, status="running").exists(), message="search running"
    )
    run_cancel(run_id=run.pk, user=e17)
    release_faults(run.pk)
    wait_until(
        lambda: not Action.objects.filter(run=run, status="running").exists(), message="search done"
    )

    run.refresh_from_db()
    assert run.status == "cancelled"
    turn = run.turn
    steps.run_step(run.pk, turn + 1)  # a late step message
    runs.advance(run.pk, turn)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.turn == turn
    assert run.actions.count() == 1 and Booking.objects.count() == 0
    assert AgentRun.objects.get(pk=run.pk).events.last().kind in (
        "run_finished",
        "execution_finished",
    )


def test_queued_write_of_a_cancelled_run_is_skipped(worker, e17):
    version = Room.objects.get(code="R7").schedule_version
    script = [
        {
            "proposals": [
                {
                    "tool": "find_available_rooms",
                    "arguments": {
                        "start_at": START.isoformat(),
                        "end_at": END.isoformat(),
                        "attendees": 3,
                    },
                }
            ]
        },
        {"proposals": [{"tool": "reserve_room", "arguments": reserve_args(version)}]},
    ]
    run = run_start(
        user=e17,
        request_text=REQUEST,
        model="scripted",
        script=script,
        faults=[{"tool": "find_available_rooms", "kind": "pause"}],
    )
    wait_until(
        lambda: Action.objects.filter(run=run, status="running").exists(), message="search running"
    )
    # Simulate a write already queued when the run ends.
    write = Action.objects.create(
        run=run,
        turn=9,
        call_index=0,
        tool="reserve_room",
        params=reserve_args(version),
        params_digest="x",
        readonly=False,
        status=ActionStatus.QUEUED,
        idempotency_key=f"{run.pk}:9:0",
    )
    run_cancel(run_id=run.pk, user=e17)
    release_faults(run.pk)
    recorder.action_execute(write.pk)
    write.refresh_from_db()
    assert write.status == "cancelled" and write.attempts == 0
    assert Booking.objects.count() == 0


def test_verifier_reads_current_state_not_the_old_receipt(worker, e17):
    version = Room.objects.get(code="R7").schedule_version
    script = [
        {"proposals": [{"tool": "reserve_room", "arguments": reserve_args(version)}]},
        {"message": "All booked!", "outcome": "done"},
    ]
    run = run_start(
        user=e17,
        request_text=REQUEST,
        model="scripted",
        script=script,
        faults=[{"tool": "reserve_room", "kind": "pause_after_commit"}],
    )
    booking = wait_until(lambda: Booking.objects.filter(requester=e17).first(), message="the write")
    booking_cancel(user=e17, booking_code=booking.code)  # the world changes after the receipt
    release_faults(run.pk)
    run = wait_for_run(run.pk)

    assert run.actions.get().status == "succeeded"  # the tool did say confirmed...
    assert (
        run.status == "failed" and run.outcome == "verification_failed"
    )  # ...but it no longer holds
    assert run.reply.startswith("Nothing was booked")
    verified = run.events.get(kind="verified")
    assert verified.payload == {"holds": False, "detail": f"{booking.code} is cancelled"}
