"""The gate, driven through real runs: a scripted model proposes, a real Celery worker executes.

Every refusal is an Action in status `rejected` with the refusal envelope, a `gate` trace event
carrying that envelope and its hint, and no booking.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentops.contract import message_text
from agentops.models import Action, AgentRun, TraceEvent
from agentops.runtime import ratelimit
from agentops.runtime.runs import run_start
from bookings.models import Booking, Room
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=2, hour=14)
WINDOW = (START.isoformat(), END.isoformat())
SCOPE = {
    "tools": ["find_available_rooms", "reserve_room"],
    "window": WINDOW,
    "attendees": 3,
    "equipment": ["projector"],
    "max_writes": 1,
}
TERMINAL = ("succeeded", "failed", "cancelled")
# The host reads the delegation from the request; the scope can only narrow it.
REQUEST = f"book a room on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"


def find(
    attendees: int = 3, equipment: tuple[str, ...] = ("projector",), start=START, end=END
) -> dict[str, Any]:
    return {
        "tool": "find_available_rooms",
        "arguments": {
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": attendees,
            "equipment": list(equipment),
        },
    }


def reserve(
    room: str = "R7",
    *,
    start=START,
    end=END,
    attendees: int = 3,
    equipment: tuple[str, ...] = ("projector",),
) -> dict[str, Any]:
    return {
        "tool": "reserve_room",
        "arguments": {
            "room_id": room,
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": attendees,
            "equipment": list(equipment),
            "expected_version": Room.objects.get(code=room).schedule_version,
        },
    }


def scripted(
    user,
    *turns: list[dict[str, Any]],
    scope: dict[str, Any] | None = None,
    statuses=TERMINAL,
    **kwargs: Any,
) -> AgentRun:
    """Start a scripted run (one list of proposals per turn); wait until it reaches ``statuses``."""
    run = run_start(
        user=user,
        request_text=kwargs.pop("request_text", REQUEST),
        model="scripted",
        script=[{"proposals": proposals} for proposals in turns],
        scope=SCOPE if scope is None else scope,
        **kwargs,
    )
    return wait_for_run(run.pk, statuses=statuses)


def gate_event(action: Action) -> TraceEvent:
    return TraceEvent.objects.get(action=action, kind="gate")


def assert_refused(action: Action, reason: str, code: str) -> None:
    """Rejected with this envelope, and the gate event records the same envelope and a hint."""
    assert action.status == "rejected"
    assert action.result["ok"] is False
    assert (action.result["reason"], action.result["code"]) == (reason, code)
    assert action.result["hint"]
    event = gate_event(action)
    assert event.payload["decision"] in ("refuse", "abort")
    assert event.payload["refusal"] == action.result
    assert action.attempts == 0
    assert not TraceEvent.objects.filter(action=action, kind="execution_started").exists()


def test_an_unknown_tool_is_rejected_and_the_hint_lists_the_real_tools(worker, e17):
    run = scripted(e17, [{"tool": "book_everything", "arguments": {"room_id": "R7"}}])

    (action,) = run.actions.all()
    assert_refused(action, "unknown_tool", "unknown_tool")
    assert action.result["signal"] == "red"
    assert "reserve_room" in action.result["hint"]
    assert gate_event(action).payload["check"] == "unknown_tool"
    assert Booking.objects.count() == 0


def test_a_tool_the_user_cannot_see_is_refused(worker, django_user_model):
    nobody = django_user_model.objects.create_user(username="nogroup", employee_id="E99")

    run = scripted(nobody, [find()], scope={"max_writes": 0})

    (action,) = run.actions.all()
    assert_refused(action, "forbidden", "tool_not_visible")


def test_a_smuggled_approval_field_is_refused_as_invalid_input(worker, e17):
    proposal = reserve("R16")
    proposal["arguments"]["approval_token"] = "approved-by-a01"

    run = scripted(e17, [proposal])

    (action,) = run.actions.all()
    assert_refused(action, "invalid_input", "approval_field_refused")
    assert run.status == "failed"
    assert Booking.objects.count() == 0


def test_schema_violations_are_refused_before_anything_runs(worker, e17):
    naive = reserve()
    naive["arguments"]["start_at"] = START.replace(tzinfo=None).isoformat()

    run = scripted(e17, [naive])

    (action,) = run.actions.all()
    assert_refused(action, "invalid_input", "schema_violation")
    assert "start_at" in action.result["message"]
    assert Booking.objects.count() == 0


@pytest.mark.parametrize(
    ("make_proposal", "scope_change", "code"),
    [
        (
            lambda: reserve(start=START.replace(hour=16), end=END.replace(hour=17)),
            {},
            "outside_window",
        ),
        (lambda: reserve(end=END.replace(hour=16)), {}, "outside_window"),
        (lambda: reserve(attendees=4), {}, "attendees_differ"),
        (lambda: reserve(equipment=()), {}, "equipment_missing"),
        (lambda: reserve(), {"max_writes": 0}, "max_writes"),
        (lambda: reserve(), {"tools": ["find_available_rooms"]}, "tool_not_delegated"),
    ],
    ids=[
        "other_window",
        "longer_window",
        "wrong_attendees",
        "missing_equipment",
        "no_writes_allowed",
        "tool_not_delegated",
    ],
)
def test_a_reservation_outside_the_delegation_is_rejected_and_books_nothing(
    worker, e17, make_proposal, scope_change, code
):
    run = scripted(e17, [make_proposal()], scope=SCOPE | scope_change)

    (action,) = run.actions.all()
    assert_refused(action, "out_of_scope", code)
    assert gate_event(action).payload["check"] == "scope"
    assert Booking.objects.count() == 0


def test_a_second_write_beyond_max_writes_is_rejected(worker, e17):
    run = scripted(e17, [reserve("R7")], [reserve("R9")])

    first, second = run.actions.order_by("turn")
    assert first.status == "succeeded"
    assert_refused(second, "out_of_scope", "max_writes")
    assert list(Booking.objects.values_list("room__code", flat=True)) == ["R7"]


def test_a_second_write_in_the_same_turn_is_rejected_before_either_runs(worker, e17):
    run = scripted(e17, [reserve("R7"), reserve("R9")])

    first, second = run.actions.order_by("call_index")
    assert first.status == "succeeded"
    assert_refused(second, "out_of_scope", "max_writes")
    assert list(Booking.objects.values_list("room__code", flat=True)) == ["R7"]


def test_calls_over_the_rate_limit_are_refused_as_yellow_rate_limited(
    worker, e17, settings, monkeypatch
):
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 2
    # The middle of one window: the three calls fall into it, whatever the wall clock says.
    monkeypatch.setattr(ratelimit.tool_calls, "clock", lambda: 1_800_000_030.0)

    run = scripted(
        e17, [find(attendees=2), find(attendees=3), find(attendees=4)], scope={"max_writes": 0}
    )

    first, second, third = run.actions.order_by("call_index")
    assert first.status == second.status == "succeeded"
    assert_refused(third, "rate_limited", "rate_limited")
    assert third.result["signal"] == "yellow"
    assert 0 < third.result["retry_after_ms"] <= 60_000
    assert gate_event(third).payload["check"] == "rate_limit"


def test_the_same_call_proposed_five_times_ends_the_run_as_loop_detected(worker, e17):
    run = scripted(e17, *([find()] for _ in range(5)), scope={"max_writes": 0})

    assert run.status == "failed"
    assert run.outcome == "loop_detected"
    actions = list(run.actions.order_by("turn"))
    assert [a.status for a in actions] == ["succeeded"] * 4 + ["rejected"]
    assert_refused(actions[-1], "loop_detected", "loop_detected")
    assert gate_event(actions[-1]).payload["decision"] == "abort"
    assert run.events.filter(kind="run_finished", payload__outcome="loop_detected").exists()


def test_four_identical_calls_are_not_yet_a_loop(worker, e17):
    run = scripted(e17, *([find()] for _ in range(4)), scope={"max_writes": 0})

    assert run.outcome != "loop_detected"
    assert run.actions.filter(status="succeeded").count() == 4


def test_the_proposal_budget_ends_the_run_as_budget_exhausted(worker, e17):
    run = scripted(
        e17,
        [find(attendees=2)],
        [find(attendees=3)],
        [find(attendees=4)],
        scope={"max_writes": 0},
        budgets={"max_proposals": 2},
    )

    assert run.status == "failed"
    assert run.outcome == "budget_exhausted"
    actions = list(run.actions.order_by("turn"))
    assert [a.status for a in actions] == ["succeeded", "succeeded", "rejected"]
    assert_refused(actions[-1], "budget_exhausted", "proposals")
    assert run.proposals == 3


def test_rejected_proposals_use_up_the_proposal_budget_too(worker, e17):
    unknown = {"tool": "book_everything", "arguments": {}}

    run = scripted(e17, [unknown], [unknown], [find()], budgets={"max_proposals": 2})

    assert run.outcome == "budget_exhausted"
    assert [a.result["reason"] for a in run.actions.order_by("turn")] == [
        "unknown_tool",
        "unknown_tool",
        "budget_exhausted",
    ]
    assert not run.actions.filter(status="succeeded").exists()


@pytest.mark.parametrize(
    ("room", "reason"),
    [
        ("R16", "R16 is a premium room that needs approval"),
        ("R15", "R15 belongs to Sales, not Engineering"),
    ],
    ids=["premium_room", "other_department"],
)
def test_a_high_risk_reservation_waits_for_approval_and_books_nothing(worker, e17, room, reason):
    run = scripted(e17, [reserve(room)], statuses=("waiting_approval", *TERMINAL))

    assert run.status == "waiting_approval"
    (action,) = run.actions.all()
    assert action.status == "waiting_approval"
    assert action.risk == "HIGH"
    assert reason in map(message_text, action.risk_reasons)
    assert action.idempotency_key == f"{run.pk}:1:0"
    event = gate_event(action)
    assert event.payload["decision"] == "approval"
    assert event.payload["risk"] == "HIGH"
    assert run.events.filter(kind="run_waiting_approval").exists()
    assert not run.events.filter(kind="execution_started").exists()
    assert Booking.objects.count() == 0


def test_an_ordinary_reservation_in_scope_passes_the_gate_and_books(worker, e17):
    run = scripted(e17, [find()], [reserve("R7")])

    assert run.status == "succeeded", (run.outcome, run.reply)
    reserve_action = run.actions.get(tool="reserve_room")
    assert reserve_action.risk == "MEDIUM"
    assert gate_event(reserve_action).payload["decision"] == "execute"
    booking = Booking.objects.get()
    assert (booking.room.code, booking.requester, booking.attendees) == ("R7", e17, 3)
    assert booking.code in run.reply


@pytest.mark.parametrize(
    "window",
    [
        ("tomorrow", "later"),
        (START.replace(tzinfo=None).isoformat(), END.replace(tzinfo=None).isoformat()),
        (END.isoformat(), START.isoformat()),
    ],
    ids=["not_datetimes", "naive", "end_before_start"],
)
def test_a_scope_with_an_unusable_window_is_refused_at_start(e17, window):
    with pytest.raises(ValueError, match="window"):
        run_start(
            user=e17,
            request_text=REQUEST,
            model="scripted",
            script=[],
            scope=SCOPE | {"window": window},
        )
    assert not AgentRun.objects.exists()


def test_a_named_room_binds_the_write_to_that_room(worker, e17):
    named = f"book R7 on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"
    run = scripted(e17, [reserve("R9")], [reserve("R7")], request_text=named, scope={})

    other, asked = run.actions.order_by("turn")
    assert_refused(other, "out_of_scope", "resource_differs")
    assert asked.status == "succeeded"
    assert list(Booking.objects.values_list("room__code", flat=True)) == ["R7"]
    assert run.status == "succeeded", (run.outcome, run.reply)


def test_a_scope_cannot_widen_a_read_only_request_into_writes(worker, e17):
    run = scripted(
        e17,
        [reserve("R7")],
        request_text="what are my bookings",
        scope={"tools": None, "max_writes": 5},
    )

    assert run.delegation["max_writes"] == 0
    assert "cancel_booking" not in run.delegation["tools"]
    (action,) = run.actions.all()
    assert_refused(action, "out_of_scope", "tool_not_delegated")
    assert Booking.objects.count() == 0


def test_a_booking_longer_than_four_hours_needs_approval(worker, e17):
    start = START.replace(hour=9)
    end = start.replace(hour=14)
    request = f"book R7 on {start:%Y-%m-%d} 09:00-14:00 for 3 people with a projector"
    run = scripted(
        e17,
        [reserve("R7", start=start, end=end)],
        request_text=request,
        scope={},
        statuses=("waiting_approval", *TERMINAL),
    )
    (action,) = run.actions.all()
    assert (run.status, action.risk) == ("waiting_approval", "HIGH")
    assert "a booking of 5 hours, longer than 4" in map(message_text, action.risk_reasons)
    assert gate_event(action).payload["policy_version"] == run.policy_version
    assert Booking.objects.count() == 0
