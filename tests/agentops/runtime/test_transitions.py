"""Every status change goes through runtime.transitions; the allowed moves are this table."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agentops.models import Action, ActionStatus, AgentRun, EventKind, RunStatus
from agentops.runtime.trace import run_insert_with_event, trace_append
from agentops.runtime.transitions import (
    ACTION_MOVES,
    RUN_MOVES,
    IllegalMoveError,
    action_create,
    action_move,
    run_move,
)
from tests.agentops.factories import action_create as action_create_row
from tests.agentops.factories import run_create

TERMINAL_RUN = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED}
TERMINAL_ACTION = {
    ActionStatus.SUCCEEDED,
    ActionStatus.FAILED,
    ActionStatus.REJECTED,
    ActionStatus.CANCELLED,
}


def test_the_run_table_names_every_status_and_terminal_runs_never_move():
    assert set(RUN_MOVES) == set(RunStatus)
    for status in TERMINAL_RUN:
        assert RUN_MOVES[status] == frozenset()
    for status in set(RunStatus) - TERMINAL_RUN:
        assert RUN_MOVES[status] & TERMINAL_RUN, f"{status} can never end"


def test_a_waiting_run_cannot_jump_to_succeeded_without_running_again():
    assert RunStatus.SUCCEEDED not in RUN_MOVES[RunStatus.WAITING_APPROVAL]


def test_the_action_table_names_every_status_and_terminal_actions_never_move():
    assert set(ACTION_MOVES) - {None} == set(ActionStatus)
    for status in TERMINAL_ACTION:
        assert ACTION_MOVES[status] == frozenset()


def test_actions_are_created_only_refused_queued_or_waiting():
    assert ACTION_MOVES[None] == {
        ActionStatus.REJECTED,
        ActionStatus.QUEUED,
        ActionStatus.WAITING_APPROVAL,
    }


def test_an_unknown_outcome_is_never_failed_without_a_human():
    assert ActionStatus.FAILED not in ACTION_MOVES[ActionStatus.UNKNOWN_OUTCOME]
    assert ActionStatus.FAILED in ACTION_MOVES[ActionStatus.NEEDS_HUMAN]


def test_a_write_is_reconciled_only_from_running():
    sources = {s for s, moves in ACTION_MOVES.items() if ActionStatus.UNKNOWN_OUTCOME in moves}
    assert sources == {ActionStatus.RUNNING}


class _Row:
    """A stand-in row: the move must raise before anything is saved."""

    pk = "x"

    def __init__(self, status):
        self.status = status

    def save(self, **kwargs):
        raise AssertionError("an illegal move must not save")


@pytest.mark.parametrize("status", sorted(TERMINAL_RUN))
def test_moving_a_terminal_run_raises_and_saves_nothing(status):
    with pytest.raises(IllegalMoveError, match="->"):
        run_move(_Row(status), RunStatus.RUNNING)


def test_moving_a_succeeded_action_raises_and_saves_nothing():
    with pytest.raises(IllegalMoveError, match="succeeded -> queued"):
        action_move(_Row(ActionStatus.SUCCEEDED), ActionStatus.QUEUED)


def test_a_terminal_run_move_needs_an_outcome():
    with pytest.raises(IllegalMoveError, match="without an outcome"):
        run_move(_Row(RunStatus.RUNNING), RunStatus.FAILED)


def test_a_run_with_writes_can_roll_back_from_every_live_status():
    live = {RunStatus.RUNNING, RunStatus.WAITING_APPROVAL, RunStatus.RECONCILING}
    for status in live:
        assert RunStatus.COMPENSATING in RUN_MOVES[status], status
    sources = {s for s, moves in RUN_MOVES.items() if RunStatus.COMPENSATING in moves}
    assert sources == live | {RunStatus.ROLLBACK_PENDING}


def test_a_rollback_never_ends_in_success_and_only_a_failed_undo_waits_for_a_human():
    assert RUN_MOVES[RunStatus.COMPENSATING] == {
        RunStatus.ROLLBACK_PENDING,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
    }
    sources = {s for s, moves in RUN_MOVES.items() if RunStatus.ROLLBACK_PENDING in moves}
    assert sources == {RunStatus.COMPENSATING}
    assert RunStatus.SUCCEEDED not in RUN_MOVES[RunStatus.ROLLBACK_PENDING]
    assert RunStatus.RUNNING not in RUN_MOVES[RunStatus.ROLLBACK_PENDING]


def test_an_unknown_outcome_is_dropped_only_as_cancelled_never_failed():
    assert ActionStatus.CANCELLED in ACTION_MOVES[ActionStatus.UNKNOWN_OUTCOME]


# --- an action's change and its event, one statement ------------------------------------------


@pytest.mark.django_db
def test_a_created_action_and_its_event_are_one_statement_and_read_back_as_saved(e17):
    run = run_create(e17, status="running")
    action = Action(run=run, turn=1, call_index=0, tool="find_available_rooms", params={"a": 1})

    with CaptureQueriesContext(connection) as sql:
        action_create(
            action, ActionStatus.QUEUED, event=EventKind.GATE, payload={"decision": "execute"}
        )

    assert len(sql) == 1
    assert not action._state.adding
    saved = Action.objects.get(pk=action.pk)
    assert (saved.status, saved.params, saved.run_id) == ("queued", {"a": 1}, run.pk)
    event = run.events.get(seq=run.event_seq)
    assert (event.kind, event.action_id, event.payload) == (
        "gate",
        action.pk,
        {"decision": "execute"},
    )


@pytest.mark.django_db
def test_an_action_move_and_its_event_save_the_move_the_run_fields_and_nothing_else(e17):
    run = run_create(e17, status="running")
    action = action_create_row(run, status="queued", params={"room_id": "R7"})
    action.run = run
    run.tool_calls += 1
    run.goal = "changed in memory only"  # not a field named: not saved

    with CaptureQueriesContext(connection) as sql:
        action_move(
            action,
            ActionStatus.RUNNING,
            event=EventKind.EXECUTION_STARTED,
            payload={"attempt": 1},
            run_fields=("tool_calls",),
            attempts=1,
        )

    assert len(sql) == 1
    saved = Action.objects.get(pk=action.pk)
    assert (saved.status, saved.attempts, saved.params) == ("running", 1, {"room_id": "R7"})
    fresh = AgentRun.objects.get(pk=run.pk)
    assert (fresh.tool_calls, fresh.event_seq) == (1, run.event_seq)
    assert fresh.goal != "changed in memory only"
    event = fresh.events.get(seq=fresh.event_seq)
    assert (event.kind, event.action_id) == ("execution_started", action.pk)


@pytest.mark.django_db
def test_an_illegal_move_with_an_event_writes_neither(e17):
    run = run_create(e17, status="running")
    action = action_create_row(run, status="succeeded")
    action.run = run
    events = run.events.count()
    with pytest.raises(IllegalMoveError):
        action_move(action, ActionStatus.RUNNING, event=EventKind.EXECUTION_STARTED, attempts=9)
    assert Action.objects.get(pk=action.pk).status == "succeeded"
    assert run.events.count() == events


@pytest.mark.django_db
def test_a_new_run_and_its_first_event_are_one_statement(e17):
    run = AgentRun(
        subject=e17,
        goal="g",
        model_name="rules",
        policy_version="p1",
        delegation={},
        deadline=timezone.now(),
    )

    with CaptureQueriesContext(connection) as sql:
        event = run_insert_with_event(run=run, kind=EventKind.RUN_STARTED, payload={"a": 1})

    assert len(sql) == 1
    assert not run._state.adding
    assert (event.seq, run.event_seq) == (1, 1)
    saved = AgentRun.objects.get(pk=run.pk)
    assert (saved.event_seq, saved.goal, saved.subject_id) == (1, "g", e17.pk)
    assert list(saved.events.values_list("seq", "kind", "payload")) == [
        (1, "run_started", {"a": 1})
    ]
    trace_append(run=saved, kind=EventKind.GATE)  # the numbering goes on from there
    assert list(saved.events.order_by("seq").values_list("seq", flat=True)) == [1, 2]
