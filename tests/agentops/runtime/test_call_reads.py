"""A call's checks share their reads (agentops.contract.call_reads), and the approval path's
statements folded into others (bench/README.md, "Issue 25 item 2, fifth pass"): each check
still sees what it saw, in fewer statements."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.selectors import roles_column
from agentops.contract import call_reads, read_once
from agentops.models import Action, ActionStatus, AgentRun, TraceEvent
from agentops.runtime import locks, runs
from agentops.runtime.direct import tool_call_governed
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from bookings import selectors
from bookings.models import Booking, Room
from tests.conftest import slot

# As the capture shows it: the parameters filled in.
ROOM_STATE = " ".join(selectors.ROOM_STATE_SQL.split()).split(" WHERE ")[0]
WINDOW_VERSION = " ".join(selectors.WINDOW_VERSION_SQL.split())[:40]


def loads() -> tuple[list[int], object]:
    calls: list[int] = []

    def load() -> int:
        calls.append(1)
        return len(calls)

    return calls, load


def test_outside_a_scope_every_read_loads():
    _calls, load = loads()
    assert [read_once("k", load), read_once("k", load)] == [1, 2]


def test_inside_a_scope_a_key_loads_once_and_a_nested_scope_is_the_same_one():
    _calls, load = loads()
    with call_reads():
        first = read_once("k", load)
        with call_reads():
            again = read_once("k", load)
        other = read_once("other", load)
    assert (first, again, other) == (1, 1, 2)
    assert read_once("k", load) == 3  # the scope has ended: a fresh read


def test_a_scope_is_its_threads_own():
    calls, load = loads()
    seen: list[int] = []
    with call_reads():
        read_once("k", load)
        thread = threading.Thread(target=lambda: seen.append(read_once("k", load)))
        thread.start()
        thread.join()
    assert seen == [2] and len(calls) == 2


@pytest.mark.django_db
def test_the_room_state_is_what_the_orm_reads(rooms):
    room = Room.objects.get(code="R16")
    state = selectors.room_state(code="R16")
    assert state == selectors.RoomState(
        room.pk,
        room.name,
        room.requires_approval,
        room.department,
        room.capacity,
        room.bookable,
        room.schedule_version,
    )
    assert selectors.room_facts(code="R16") == {
        "requires_approval": room.requires_approval,
        "department": room.department,
        "capacity": room.capacity,
        "bookable": room.bookable,
    }
    assert selectors.room_state(code="R999") is None
    assert selectors.room_facts(code="R999") is None


def premium() -> dict:
    start, end = slot(days=5, hour=10)
    return {
        "room_id": "R16",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "expected_version": Room.objects.get(code="R16").schedule_version,
        "attendees": 4,
    }


def statements(sql: CaptureQueriesContext) -> list[str]:
    return [" ".join(q["sql"].split()) for q in sql.captured_queries]


@pytest.mark.integration
@pytest.mark.usefixtures("rooms")
def test_a_call_sent_to_approval_reads_its_room_once_and_saves_its_deadlines_with_it(
    transactional_db, e17
):
    arguments = premium()
    with CaptureQueriesContext(connection) as sql:
        answer = tool_call_governed(user=e17, name="reserve_room", arguments=arguments)

    assert answer["code"] == "approval_pending"
    sent = statements(sql)
    # The gate's risk, the binding's facts, the summary's name: one read (four before), the
    # binding's window version one more, and no UPDATE of the action's or the run's deadline
    # of their own (two before).
    assert sum(s.startswith(ROOM_STATE) for s in sent) == 1
    assert sum(s.startswith(WINDOW_VERSION) for s in sent) == 1
    assert not [
        s for s in sent if "bookings_room" in s and not s.startswith((ROOM_STATE, WINDOW_VERSION))
    ]
    assert not [s for s in sent if s.startswith('UPDATE "agentops_')]
    action = Action.objects.get(pk=answer["pending"]["action_id"])
    run = AgentRun.objects.get(pk=action.run_id)
    request = ApprovalRequest.objects.get(action_ref=str(action.pk))
    assert action.status == ActionStatus.WAITING_APPROVAL
    assert request.deadline == action.proposal_deadline
    assert request.binding["proposal_expiry"] == action.proposal_deadline.isoformat()
    assert run.deadline >= action.proposal_deadline
    # Nobody touched the window: its version is 0, whatever the room's.
    assert request.binding["environment_version"] == 0
    assert request.binding["policy_facts"]["facts"] == selectors.room_facts(code="R16")
    assert request.intent["summary"]["params"]["room_name"] == Room.objects.get(code="R16").name


@pytest.mark.integration
@pytest.mark.usefixtures("rooms")
def test_an_approved_call_starts_in_the_transaction_that_settles_its_approval(
    transactional_db, e17, approver, monkeypatch
):
    answer = tool_call_governed(user=e17, name="reserve_room", arguments=premium())
    action_id, run_id = answer["pending"]["action_id"], answer["pending"]["run_id"]
    request = ApprovalRequest.objects.get(action_ref=action_id)
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    locked: list[str] = []
    original = locks.run_action_locked

    def counting(run, action):
        locked.append(str(action))
        return original(run, action)

    monkeypatch.setattr(locks, "run_action_locked", counting)

    with CaptureQueriesContext(connection) as sql:
        runs.action_approval_settled(action_id, run_id=run_id)

    action = Action.objects.get(pk=action_id)
    assert action.status == ActionStatus.SUCCEEDED
    assert Booking.objects.filter(idempotency_key=action.idempotency_key).exists()
    # Locked to settle and start it, then to finish it: three times before (the start locked
    # the run again, in a transaction of its own). The run given, nothing looks it up.
    assert locked == [action_id, action_id]
    assert not [s for s in statements(sql) if s.startswith('SELECT "agentops_action"."run_id"')]
    assert AgentRun.objects.get(pk=run_id).status == "succeeded"


ROLES = " ".join(roles_column("%s").split())[len("ARRAY(") : -1].split(" WHERE ")[0]


@pytest.mark.integration
@pytest.mark.usefixtures("rooms")
def test_an_approved_calls_settlement_reads_the_roles_with_its_lock_and_saves_the_decision_with_the_move(
    transactional_db, e17, approver
):
    answer = tool_call_governed(user=e17, name="reserve_room", arguments=premium())
    action_id, run_id = answer["pending"]["action_id"], answer["pending"]["run_id"]
    request = ApprovalRequest.objects.get(action_ref=action_id)
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok

    with CaptureQueriesContext(connection) as sql:
        runs.action_approval_settled(action_id, run_id=run_id)

    assert Action.objects.get(pk=action_id).status == ActionStatus.SUCCEEDED
    sent = statements(sql)
    # The subject's roles: read by the lock's statement, not by one of their own (one before).
    assert not [s for s in sent if s.startswith(ROLES)]
    assert sum(ROLES in s for s in sent if s.startswith("WITH r AS MATERIALIZED")) >= 1
    # The action's move to queued saves the decision's event; no UPDATE of the action alone.
    assert not [s for s in sent if s.startswith("UPDATE agentops_action")]
    kinds = list(
        TraceEvent.objects.filter(run_id=run_id).order_by("seq").values_list("kind", flat=True)
    )
    decided = kinds.index("approval_decided")
    assert kinds[decided + 1 : decided + 3] == ["run_resumed", "execution_started"], kinds
    event = TraceEvent.objects.get(run_id=run_id, kind="approval_decided")
    assert str(event.action_id) == action_id
    assert event.payload["status"] == "approved" and event.payload["reason"] == "ok"
    assert event.payload["approver"] == approver.get_username()
    seqs = list(
        TraceEvent.objects.filter(run_id=run_id).order_by("seq").values_list("seq", flat=True)
    )
    assert seqs == list(range(1, len(seqs) + 1))


@pytest.mark.integration
@pytest.mark.usefixtures("rooms")
def test_a_role_removed_after_the_approval_stops_the_approved_call(transactional_db, e17, approver):
    answer = tool_call_governed(user=e17, name="reserve_room", arguments=premium())
    action_id, run_id = answer["pending"]["action_id"], answer["pending"]["run_id"]
    request = ApprovalRequest.objects.get(action_ref=action_id)
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    e17.groups.remove(Group.objects.get(name="employees"))

    runs.action_approval_settled(action_id, run_id=run_id)

    action = Action.objects.get(pk=action_id)
    assert action.status == ActionStatus.REJECTED and action.attempts == 0
    assert action.result["code"] == "tool_not_visible"
    assert not Booking.objects.filter(idempotency_key=action.idempotency_key).exists()
