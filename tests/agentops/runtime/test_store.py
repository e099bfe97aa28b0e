"""agentops.runtime.store: every hand-written read returns what the queryset it replaces
returns, and every hand-written write leaves the rows the ORM's save leaves, column by column as
PostgreSQL holds them (a plain SELECT), defaults and timestamps included (the clock frozen)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.contrib.postgres.functions import TransactionNow
from django.db import connection, models, transaction
from django.db.models import F, Value
from django.db.models.expressions import DatabaseDefault
from django.db.models.functions import Lower
from django.test.utils import isolate_apps
from django.utils import timezone

from accounts.selectors import user_roles
from agentops.models import (
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunKind,
    RunOutcome,
    RunStatus,
    TraceEvent,
)
from agentops.runtime import store
from agentops.runtime.store import action_same_succeeded, run_action_locked, turn_claim
from agentops.runtime.trace import (
    action_insert_with_event,
    action_save_with_event,
    event_json,
    run_event,
    run_insert_with_event,
    run_save_with_event,
    trace_append,
)
from agentops.selectors import RunDetail, run_detail_for_user
from tests.accounts.factories import ADMINS, APPROVERS, EMPLOYEES
from tests.agentops.factories import action_create, run_create

pytestmark = pytest.mark.django_db


def test_a_write_finds_the_same_call_the_run_already_succeeded_with(e17, e23):
    run = run_create(e17, status="running")
    # The first of two: the write; the second a copy deduplicated from it. Their ids sort the
    # other way round, so only proposal order picks the first.
    done = action_create(
        run,
        tool="reserve_room",
        status="succeeded",
        params_digest="same",
        id=uuid.UUID(int=2**127),
    )
    copy = action_create(
        run, tool="reserve_room", status="succeeded", params_digest="same", id=uuid.UUID(int=1)
    )
    again = action_create(run, tool="reserve_room", status="running", params_digest="same")
    # Not the same call: another digest, another tool, not succeeded, another run.
    action_create(run, tool="reserve_room", status="succeeded", params_digest="other")
    action_create(run, tool="cancel_booking", status="succeeded", params_digest="same")
    failed = action_create(run, tool="reserve_room", status="failed", params_digest="failed")
    theirs = run_create(e23, status="running")
    action_create(theirs, tool="reserve_room", status="succeeded", params_digest="failed")

    found = action_same_succeeded(again)

    assert found is not None
    assert (found.pk, found.run_id, found.status, found.result) == (
        done.pk,
        run.pk,
        "succeeded",
        done.result,
    )
    assert action_same_succeeded(done).pk == copy.pk  # never itself
    assert action_same_succeeded(failed) is None


def claim(run, turn: int, *, now=None, max_turns: int = 8):
    return turn_claim(run.pk, turn, now=now or timezone.now(), max_turns=max_turns)


def test_a_turn_claim_reads_the_run_its_subject_and_their_roles_as_the_orm_would(approver):
    run = run_create(approver, status="running")
    approver.groups.remove(Group.objects.get(name=APPROVERS))  # the roles as of the claim

    claimed = claim(run, 1)

    assert claimed is not None
    got, roles = claimed
    want = AgentRun.objects.select_related("subject").get(pk=run.pk)
    assert want.turn == 1  # the claim took the turn
    for field in AgentRun._meta.concrete_fields:
        assert getattr(got, field.attname) == getattr(want, field.attname), field.name
    for field in type(want.subject)._meta.concrete_fields:
        assert getattr(got.subject, field.attname) == getattr(want.subject, field.attname)
    assert roles == user_roles(user=want.subject) == {EMPLOYEES}


def test_a_superusers_claim_carries_the_admin_role(admin_user):
    _, roles = claim(run_create(admin_user, status="running"), 1)
    assert roles == user_roles(user=admin_user) == {EMPLOYEES, ADMINS}


@pytest.mark.parametrize(
    "case",
    ["duplicate", "early", "not running", "call open", "proposed", "turns spent", "deadline"],
)
def test_a_turn_that_is_not_there_to_take_is_not_claimed_and_nothing_changes(e17, case):
    run = run_create(e17, status="succeeded" if case == "not running" else "running")
    now, turn, max_turns = timezone.now(), 1, 8
    if case == "duplicate":  # turn 1 delivered again after the run went on to turn 2
        AgentRun.objects.filter(pk=run.pk).update(turn=2)
    elif case == "early":
        turn = 3
    elif case == "call open":
        action_create(run, status="running")
        turn = 2
        AgentRun.objects.filter(pk=run.pk).update(turn=1)
    elif case == "proposed":  # this turn's claim was taken and a call proposed under it
        AgentRun.objects.filter(pk=run.pk).update(turn=1)
        action_create(run, status="succeeded")
    elif case == "turns spent":
        max_turns = 0
    elif case == "deadline":
        now = run.deadline
    before = AgentRun.objects.values().get(pk=run.pk)

    assert claim(run, turn, now=now, max_turns=max_turns) is None
    assert AgentRun.objects.values().get(pk=run.pk) == before


def test_a_claim_the_runs_budgets_bound_uses_them_over_the_default(e17):
    run = run_create(e17, status="running")
    AgentRun.objects.filter(pk=run.pk).update(budgets={"max_turns": 1}, turn=1)
    assert claim(run, 2, max_turns=8) is None
    AgentRun.objects.filter(pk=run.pk).update(budgets={"max_turns": 2})
    assert claim(run, 2, max_turns=8) is not None


def test_the_run_and_its_action_are_locked_and_read_as_the_orm_would(e17, e23):
    run = run_create(e17, status="running")
    action = action_create(run, tool="reserve_room", status="running")
    theirs = action_create(run_create(e23, status="running"))

    with transaction.atomic():
        got = run_action_locked(run.pk, action.pk)
        assert got is not None
        got_run, got_action = got
        for want, have in ((AgentRun.objects.get(pk=run.pk), got_run), (action, got_action)):
            for field in type(want)._meta.concrete_fields:
                assert getattr(have, field.attname) == getattr(want, field.attname), field.name
        assert got_run.subject.username == "e17"
        assert got_action.run is got_run
        assert run_action_locked(run.pk, theirs.pk) is None  # not this run's
        assert run_action_locked(uuid.uuid4(), action.pk) is None


def test_an_action_with_its_run_and_subject_is_read_as_the_orm_would(e17, e23):
    run = run_create(e17, status="waiting_approval")
    action = action_create(run, tool="reserve_room", status="waiting_approval")
    action_create(run_create(e23, status="running"))

    got = store.action_with_run(action.pk)
    want = Action.objects.select_related("run", "run__subject").get(pk=action.pk)
    for have, expected in ((got, want), (got.run, want.run), (got.run.subject, want.run.subject)):
        for field in type(expected)._meta.concrete_fields:
            assert getattr(have, field.attname) == getattr(expected, field.attname), field.name
    assert got.run.subject.username == "e17"
    assert store.action_with_run(uuid.uuid4()) is None


def blocked_on_a_lock(timeout: float) -> None:
    """Wait until another session of this database waits for a row lock."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the other session never waited for the lock")


@pytest.mark.django_db(transaction=True)
def test_a_lock_that_waited_reads_what_the_holder_committed(e17):
    """Both rows come from their own lock: after waiting for a transaction that changed the
    run and the action, the statement returns their new versions, not those of its start."""
    run = run_create(e17, status="running")
    action = action_create(run, status="running")
    locked, waiting = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def holder() -> None:
        try:
            with transaction.atomic():
                run_action_locked(run.pk, action.pk)
                locked.set()
                waiting.wait(5)
                blocked_on_a_lock(timeout=5)  # the other side has started and waits for us
                Action.objects.filter(pk=action.pk).update(status="succeeded")
                AgentRun.objects.filter(pk=run.pk).update(tool_calls=7)
        finally:
            connection.close()

    def waiter() -> None:
        try:
            locked.wait(5)
            waiting.set()
            with transaction.atomic():
                got = run_action_locked(run.pk, action.pk)
                assert got is not None
                seen["status"], seen["tool_calls"] = got[1].status, got[0].tool_calls
        finally:
            connection.close()

    threads = [threading.Thread(target=holder), threading.Thread(target=waiter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"status": "succeeded", "tool_calls": 7}


# --- Writes: the same instance saved through the store and through the ORM --------------------

T0 = datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=UTC)
T1 = T0 + timedelta(minutes=7, microseconds=1)


class Clock:
    """``django.utils.timezone.now`` frozen at ``at`` (what auto_now, auto_now_add and the trace
    read), moved by the test."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def clock(monkeypatch):
    frozen = Clock(T0)
    monkeypatch.setattr(timezone, "now", frozen)
    return frozen


def stored(model, **where) -> dict[str, Any]:
    """One row of ``model`` as PostgreSQL holds it: a plain SELECT, no ORM conversion."""
    (column, value), q = next(iter(where.items())), connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {q(model._meta.db_table)} WHERE {q(column)} = %s", [value])
        rows = cursor.fetchall()
        names = [c.name for c in cursor.description]
    assert len(rows) == 1, (model, where, rows)
    return dict(zip(names, rows[0], strict=True))


def rows_of(run_id, *action_ids) -> dict[str, Any]:
    """The run, the actions and the run's events, as stored (an event's id is the sequence's)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM agentops_traceevent WHERE run_id = %s ORDER BY seq", [run_id])
        names = [c.name for c in cursor.description]
        events = [
            {k: v for k, v in zip(names, row, strict=True) if k != "id"}
            for row in cursor.fetchall()
        ]
    return {
        "run": stored(AgentRun, id=run_id),
        "actions": [stored(Action, id=pk) for pk in action_ids],
        "events": events,
    }


def both_ways(by_store, by_orm, read):
    """What ``read()`` returns after ``by_store()`` and, from the same start, after
    ``by_orm()`` (the first undone by a savepoint rollback)."""
    start = transaction.savepoint_create()
    by_store()
    via_store = read()
    transaction.savepoint_rollback(start)
    by_orm()
    return via_store, read()


RUN_ID, ACTION_ID = uuid.UUID(int=0xA1), uuid.UUID(int=0xB2)


def new_run(subject, columns=None) -> AgentRun:
    """A new run with only what the model requires: the rest are its defaults."""
    required = {
        "id": RUN_ID,
        "subject": subject,
        "goal": "Book R7",
        "model_name": "rules",
        "policy_version": "p1",
        "deadline": T0 + timedelta(minutes=3),
    }
    return AgentRun(**(required | (columns or {})))


def run_columns(other_user) -> dict[str, Any]:
    """A value for every column a run's save may set, none its default."""
    return {
        "subject": other_user,
        "goal": "Cancel B-1",
        "language": "zh",
        "kind": RunKind.DIRECT,
        "model_name": "openai",
        "delegation": {"tools": ["cancel_booking"]},
        "budgets": {"max_turns": 3},
        "policy_version": "p2",
        "faults": [{"tool": "reserve_room", "fault": "timeout"}],
        "model_script": [{"say": "hello"}],
        "status": RunStatus.FAILED,
        "outcome": RunOutcome.GAVE_UP,
        "reply": "Could not do it.",
        "turn": 4,
        "proposals": 5,
        "tool_calls": 6,
        "deadline": T1 + timedelta(minutes=9),
        "channel_session": "session-9",
        "created_at": T0 - timedelta(days=1),
        "updated_at": T0 - timedelta(days=2),  # auto_now: the clock's, whatever is set
        "finished_at": T1 - timedelta(seconds=3),
        "idempotency_key": "key-9",
        "request_digest": "digest-9",
        "conversation_id": uuid.UUID(int=0xC3),
        "conversation": [{"request": "earlier", "reply": "ok"}],
    }


def new_action(run, columns=None) -> Action:
    required = {
        "id": ACTION_ID,
        "run": run,
        "turn": 1,
        "call_index": 0,
        "tool": "find_available_rooms",
        "params": {"room_id": "R7"},
        "params_digest": "digest",
        "status": ActionStatus.QUEUED,
    }
    return Action(**(required | (columns or {})))


def action_columns(other_run, other_action) -> dict[str, Any]:
    """A value for every column an action's save may set, none its default."""
    return {
        "run": other_run,
        "turn": 3,
        "call_index": 2,
        "tool": "reserve_room",
        "params": {"room_id": "R9", "attendees": 3},
        "params_digest": "digest-2",
        "readonly": False,
        "risk": "HIGH",
        "risk_reasons": ["premium room"],
        "observed_version": 12,
        "idempotency_key": "run:3:2",
        "compensation": {"tool": "cancel_booking", "key": "undo"},
        "compensates": other_action,
        "status": ActionStatus.SUCCEEDED,
        "attempts": 2,
        "result": {"ok": True, "data": {"booking_id": "B-7"}},
        "proposal_deadline": T1 + timedelta(minutes=1),
        "lease_expires_at": T1 + timedelta(seconds=30),
        "started_at": T1 - timedelta(seconds=2),
        "finished_at": T1,
        "duration_ms": 2000,
        "task_id": "task-9",
        "created_at": T0 - timedelta(hours=1),
    }


def test_the_columns_given_cover_every_column_an_insert_writes(e23):
    """The comparisons below set each of these: a new column must be added to them."""
    insert = {f.name for f in store.insert_fields(AgentRun)}
    assert set(run_columns(e23)) | {"id", "event_seq"} == insert
    assert set(action_columns(None, None)) | {"id"} == {f.name for f in store.insert_fields(Action)}


def test_every_statement_is_one_psycopg_caches_the_parsing_of():
    """psycopg parses a query into PostgreSQL's form again on every call past 4096 characters
    or 50 parameters (psycopg._queries): +0.35 ms of CPU per statement, measured."""
    statements = {
        name: value
        for name, value in vars(store).items()
        if name.endswith("_SQL") and isinstance(value, str)
    }
    assert len(statements) == 19
    for name, statement in statements.items():
        sql = store._sql(statement)
        assert len(sql.encode()) <= 4096, name
        assert len(set(re.findall(r"%\((\w+)\)s", sql))) <= 50, name


def differing(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {column for column in before if before[column] != after[column]}


@pytest.mark.parametrize("given", ["defaults", "every column"])
def test_a_run_inserted_by_the_store_is_the_row_save_inserts(clock, e17, e23, given):
    columns = run_columns(e23) if given == "every column" else {}
    mine, theirs = new_run(e17, columns), new_run(e17, columns)

    via_store, via_orm = both_ways(
        lambda: store.run_insert(mine), theirs.save, lambda: stored(AgentRun, id=RUN_ID)
    )

    assert via_store == via_orm
    assert via_store["created_at"] == via_store["updated_at"] == T0  # auto_now(_add)
    if given == "defaults":
        assert (via_store["language"], via_store["status"], via_store["faults"]) == (
            "en",
            "running",
            "[]",  # a callable default (list)
        )
    assert not mine._state.adding
    assert mine._state.db == theirs._state.db


@pytest.mark.parametrize("given", ["defaults", "every column"])
def test_an_action_inserted_by_the_store_is_the_row_save_inserts(clock, e17, e23, given):
    run, other = run_create(e17, status="running"), run_create(e23, status="running")
    compensated = action_create(other, tool="reserve_room")
    columns = action_columns(other, compensated) if given == "every column" else {}
    mine, theirs = new_action(run, columns), new_action(run, columns)

    via_store, via_orm = both_ways(
        lambda: store.action_insert(mine), theirs.save, lambda: stored(Action, id=ACTION_ID)
    )

    assert via_store == via_orm
    if given == "defaults":
        assert (via_store["created_at"], via_store["risk_reasons"], via_store["result"]) == (
            T0,
            "[]",
            None,
        )
    assert not mine._state.adding


def saved_action(e17, e23):
    """A saved action and what a save may set on it (another run, another action, ...)."""
    run, other = run_create(e17, status="running"), run_create(e23, status="running")
    action = action_create(run, id=ACTION_ID, status="queued")
    return action, action_columns(other, action_create(other, tool="reserve_room"))


@pytest.mark.parametrize("saving", ["every column", "two columns"])
def test_an_action_saved_by_the_store_is_the_row_save_update_fields_leaves(clock, e17, e23, saving):
    _, columns = saved_action(e17, e23)
    names = list(store.ACTION_MOVE_COLUMNS) if saving == "every column" else ["status", "result"]
    before = stored(Action, id=ACTION_ID)

    def change() -> Action:
        copy = Action.objects.get(pk=ACTION_ID)
        for name, value in columns.items():  # all of them in memory; only ``names`` saved
            setattr(copy, name, value)
        return copy

    mine, theirs = change(), change()
    clock.at = T1
    via_store, via_orm = both_ways(
        lambda: store.action_save(mine, names),
        lambda: theirs.save(update_fields=names),
        lambda: stored(Action, id=ACTION_ID),
    )

    assert via_store == via_orm
    expected = {Action._meta.get_field(n).column for n in names}
    assert differing(before, via_store) == expected  # each saved column changed, no other


def test_an_action_save_that_finds_no_row_raises_as_the_orm_does(e17):
    ghost = action_create(run_create(e17, status="running"))
    Action.objects.filter(pk=ghost.pk).delete()  # the instance outlives its row
    with pytest.raises(Action.NotUpdated), transaction.atomic():
        ghost.save(update_fields=["status"])
    with pytest.raises(Action.NotUpdated), transaction.atomic():
        store.action_save(ghost, ["status"])
    with pytest.raises(ValueError, match="not a column to save"):
        store.action_save(ghost, ["id"])
    with pytest.raises(ValueError, match="not a column this saves"):
        store.action_save(ghost, ["tool"])


def orm_event(run, kind, payload, action=None) -> None:
    """What the event statements do, through the ORM: number the event, then insert it."""
    AgentRun.objects.filter(pk=run.pk).update(event_seq=F("event_seq") + 1)
    seq = AgentRun.objects.values_list("event_seq", flat=True).get(pk=run.pk)
    TraceEvent.objects.create(run_id=run.pk, seq=seq, kind=kind, action=action, payload=payload)


def test_an_event_appended_is_the_rows_the_orm_numbers_and_inserts(clock, e17):
    run = run_create(e17, status="running")
    action = action_create(run)
    payload = {"tool": "x", "nested": {"a": [1, 2]}}
    clock.at = T1

    via_store, via_orm = both_ways(
        lambda: trace_append(run=run, kind=EventKind.GATE, payload=payload, action=action),
        lambda: orm_event(run, EventKind.GATE, payload, action),
        lambda: rows_of(run.pk, action.pk),
    )

    assert via_store == via_orm
    assert via_store["events"][-1]["created_at"] == T1
    assert via_store["events"][-1]["action_id"] == action.pk


def test_a_new_run_with_its_first_event_is_the_rows_the_orm_inserts(clock, e17):
    mine, theirs = new_run(e17), new_run(e17)

    def by_orm() -> None:
        theirs.event_seq = 1
        theirs.save()
        TraceEvent.objects.create(run=theirs, seq=1, kind=EventKind.RUN_STARTED, payload={"a": 1})

    via_store, via_orm = both_ways(
        lambda: run_insert_with_event(run=mine, kind=EventKind.RUN_STARTED, payload={"a": 1}),
        by_orm,
        lambda: rows_of(RUN_ID),
    )

    assert via_store == via_orm
    assert [e["seq"] for e in via_store["events"]] == [1]
    assert (mine.event_seq, mine._state.adding) == (1, False)


def change_run(run_id, columns) -> AgentRun:
    run = AgentRun.objects.get(pk=run_id)
    for name, value in columns.items():
        setattr(run, name, value)
    return run


@pytest.mark.parametrize("saving", ["every column", "a status move"])
def test_a_run_saved_with_its_event_is_the_rows_the_orm_saves(clock, e17, e23, saving):
    run_id = run_create(e17, status="running").pk
    columns = run_columns(e23)
    every = saving == "every column"
    names = store.RUN_MOVE_COLUMNS if every else ("status", "outcome", "finished_at")
    before = stored(AgentRun, id=run_id)
    mine, theirs = change_run(run_id, columns), change_run(run_id, columns)
    clock.at = T1

    def by_orm() -> None:
        theirs.save(update_fields=(*names, "updated_at"))
        orm_event(theirs, EventKind.RUN_FINISHED, {"x": 1})

    via_store, via_orm = both_ways(
        lambda: run_save_with_event(
            run=mine, fields=names, kind=EventKind.RUN_FINISHED, payload={"x": 1}
        ),
        by_orm,
        lambda: rows_of(run_id),
    )

    assert via_store == via_orm
    expected = {AgentRun._meta.get_field(n).column for n in (*names, "updated_at", "event_seq")}
    assert differing(before, via_store["run"]) == expected
    assert mine.event_seq == via_store["run"]["event_seq"]


@pytest.mark.parametrize("saving", ["every column", "a status move"])
def test_a_run_saved_with_events_before_its_own_is_the_rows_the_orm_saves(clock, e17, e23, saving):
    """A last step's event and its writes' verifications with the run's end, in one statement
    (RUN_SAVE_EVENTS_SQL): the rows the ORM writes in one statement per event and a save."""
    run_id = run_create(e17, status="running").pk
    action = action_create(AgentRun.objects.get(pk=run_id))
    columns = run_columns(e23)
    names = store.RUN_MOVE_COLUMNS if saving == "every column" else ("status", "outcome")
    before = stored(AgentRun, id=run_id)
    mine, theirs = change_run(run_id, columns), change_run(run_id, columns)
    step = {"turn": 3, "message": "好的 — done", "proposals": []}
    verified = {"holds": True, "detail": "B212 confirmed in R7", "n": [1, {"x": None}]}
    clock.at = T1

    def by_orm() -> None:
        orm_event(theirs, EventKind.MODEL_STEP, step)
        orm_event(theirs, EventKind.VERIFIED, verified, action)
        theirs.save(update_fields=(*names, "updated_at"))
        orm_event(theirs, EventKind.RUN_FINISHED, {"x": 1})

    earlier = [
        run_event(mine, EventKind.MODEL_STEP, step),
        run_event(mine, EventKind.VERIFIED, verified, action=action),
    ]
    via_store, via_orm = both_ways(
        lambda: run_save_with_event(
            run=mine, fields=names, kind=EventKind.RUN_FINISHED, payload={"x": 1}, before=earlier
        ),
        by_orm,
        lambda: rows_of(run_id),
    )

    assert via_store == via_orm
    kinds = [e["kind"] for e in via_store["events"][-3:]]
    assert kinds == [EventKind.MODEL_STEP, EventKind.VERIFIED, EventKind.RUN_FINISHED]
    expected = {AgentRun._meta.get_field(n).column for n in (*names, "updated_at", "event_seq")}
    assert differing(before, via_store["run"]) == expected
    assert [e.seq for e in earlier] == [mine.event_seq - 2, mine.event_seq - 1]
    assert all(e.pk is not None for e in earlier)


def test_events_of_another_run_are_refused_and_nothing_is_written(e17):
    run, other = run_create(e17, status="running"), run_create(e17, status="running")
    events = TraceEvent.objects.count()

    with pytest.raises(ValueError, match="events of this run"):
        run_save_with_event(
            run=run,
            fields=("status",),
            kind=EventKind.RUN_FINISHED,
            payload={},
            before=[run_event(other, EventKind.MODEL_STEP, {})],
        )
    assert TraceEvent.objects.count() == events
    assert AgentRun.objects.get(pk=run.pk).event_seq == run.event_seq


@pytest.mark.parametrize("run_fields", [(), ("proposals",)])
def test_a_new_action_with_its_event_is_the_rows_the_orm_saves(clock, e17, e23, run_fields):
    run_id = run_create(e17, status="running").pk
    before = stored(AgentRun, id=run_id)
    mine_run, their_run = change_run(run_id, {"proposals": 3}), change_run(run_id, {"proposals": 3})
    mine, theirs = new_action(mine_run), new_action(their_run)
    clock.at = T1

    def by_orm() -> None:
        theirs.save()
        if run_fields:
            their_run.save(update_fields=(*run_fields, "updated_at"))
        orm_event(their_run, EventKind.GATE, {"d": "execute"}, theirs)

    via_store, via_orm = both_ways(
        lambda: action_insert_with_event(
            run=mine_run,
            action=mine,
            kind=EventKind.GATE,
            payload={"d": "execute"},
            run_fields=run_fields,
        ),
        by_orm,
        lambda: rows_of(run_id, ACTION_ID),
    )

    assert via_store == via_orm
    changed = {"event_seq"} | ({"proposals", "updated_at"} if run_fields else set())
    assert differing(before, via_store["run"]) == changed
    assert via_store["actions"][0]["created_at"] == T1
    assert not mine._state.adding


@pytest.mark.parametrize("run_fields", [(), ("proposals",)])
def test_a_new_action_with_a_run_event_before_its_own_is_the_rows_the_orm_saves(
    clock, e17, e23, run_fields
):
    """A planning step's event and its first proposal's, with the action, in one statement
    (ACTION_INSERT_EVENTS_SQL): the rows the ORM writes in three."""
    run_id = run_create(e17, status="running").pk
    before = stored(AgentRun, id=run_id)
    mine_run, their_run = change_run(run_id, {"proposals": 3}), change_run(run_id, {"proposals": 3})
    mine, theirs = new_action(mine_run), new_action(their_run)
    clock.at = T1

    def by_orm() -> None:
        orm_event(their_run, EventKind.MODEL_STEP, {"turn": 2, "proposals": []})
        theirs.save()
        if run_fields:
            their_run.save(update_fields=(*run_fields, "updated_at"))
        orm_event(their_run, EventKind.GATE, {"d": "execute"}, theirs)

    step = run_event(mine_run, EventKind.MODEL_STEP, {"turn": 2, "proposals": []})
    via_store, via_orm = both_ways(
        lambda: action_insert_with_event(
            run=mine_run,
            action=mine,
            kind=EventKind.GATE,
            payload={"d": "execute"},
            run_fields=run_fields,
            before=step,
        ),
        by_orm,
        lambda: rows_of(run_id, ACTION_ID),
    )

    assert via_store == via_orm
    assert [e["kind"] for e in via_store["events"][-2:]] == [EventKind.MODEL_STEP, EventKind.GATE]
    fields = {"proposals", "updated_at"} if run_fields else set()
    assert differing(before, via_store["run"]) == {"event_seq"} | fields
    assert step.seq == mine_run.event_seq - 1 and step.pk is not None


def test_an_earlier_event_about_an_action_is_refused_and_nothing_is_written(e17):
    run = run_create(e17, status="running")
    other = action_create(run)
    earlier = run_event(run, EventKind.MODEL_STEP, {})
    earlier.action = other
    events = TraceEvent.objects.filter(run=run).count()

    with pytest.raises(ValueError, match="about no action"):
        action_insert_with_event(
            run=run, action=new_action(run), kind=EventKind.GATE, payload={}, before=earlier
        )
    assert TraceEvent.objects.filter(run=run).count() == events
    assert not Action.objects.filter(pk=ACTION_ID).exists()


@pytest.mark.parametrize("run_fields", [(), ("tool_calls",)])
def test_an_action_saved_with_its_event_is_the_rows_the_orm_saves(clock, e17, e23, run_fields):
    action, columns = saved_action(e17, e23)
    run_id = action.run_id
    names = store.ACTION_MOVE_COLUMNS
    before = stored(Action, id=ACTION_ID)

    def change() -> tuple[AgentRun, Action]:
        run = change_run(run_id, {"tool_calls": 1})
        copy = Action.objects.get(pk=ACTION_ID)
        for name, value in columns.items():
            setattr(copy, name, value)
        return run, copy

    (mine_run, mine), (their_run, theirs) = change(), change()
    clock.at = T1

    def by_orm() -> None:
        theirs.save(update_fields=names)
        if run_fields:
            their_run.save(update_fields=(*run_fields, "updated_at"))
        orm_event(their_run, EventKind.EXECUTION_STARTED, {"attempt": 2}, theirs)

    via_store, via_orm = both_ways(
        lambda: action_save_with_event(
            run=mine_run,
            action=mine,
            fields=names,
            kind=EventKind.EXECUTION_STARTED,
            payload={"attempt": 2},
            run_fields=run_fields,
        ),
        by_orm,
        lambda: rows_of(run_id, ACTION_ID),
    )

    assert via_store == via_orm
    assert differing(before, via_store["actions"][0]) == {
        Action._meta.get_field(n).column for n in names
    }
    assert via_store["run"]["tool_calls"] == (1 if run_fields else 0)


def test_a_turn_claim_writes_what_the_orms_update_of_the_turn_writes(clock, e17):
    run_id = run_create(e17, status="running").pk

    via_store, via_orm = both_ways(
        lambda: claim(AgentRun(pk=run_id), 1, now=T0 + timedelta(minutes=1)),
        lambda: AgentRun.objects.filter(pk=run_id).update(
            turn=1, updated_at=T0 + timedelta(minutes=1)
        ),
        lambda: stored(AgentRun, id=run_id),
    )

    assert via_store == via_orm
    assert (via_store["turn"], via_store["updated_at"]) == (1, T0 + timedelta(minutes=1))


# --- Defaults, for any model: a throwaway table with every kind of default -------------------


@contextmanager
def probe_model():
    """A model with a Python default, a callable one, auto_now(_add), db_defaults (alone and
    beside a Python default), a generated column and an auto-increment key; its table lives in
    the test's transaction."""
    with isolate_apps("agentops"):

        class Probe(models.Model):
            label = models.CharField(max_length=20, default="plain")
            token = models.UUIDField(default=uuid.uuid4)
            data = models.JSONField(default=dict)
            count = models.IntegerField(db_default=7)
            shade = models.CharField(max_length=20, db_default="teal")
            at = models.DateTimeField(db_default=TransactionNow())
            mixed = models.IntegerField(default=3, db_default=9)  # the Python default wins
            size = models.IntegerField(null=True)
            created = models.DateTimeField(auto_now_add=True)
            updated = models.DateTimeField(auto_now=True)
            twice = models.GeneratedField(
                expression=F("count") * 2, output_field=models.IntegerField(), db_persist=True
            )

            class Meta:
                app_label = "agentops"

            def __str__(self) -> str:
                return self.label

        with connection.schema_editor() as editor:
            editor.create_model(Probe)
        yield Probe


PROBE_INSERT = (
    "INSERT INTO {table} ({insert_columns}) VALUES ({insert_values}) RETURNING {returning}"
)
PROBE_SAVE = "UPDATE {table} SET {sets} WHERE id = %(pk)s"
PROBE_SAVED = ("label", "count", "data", "size", "updated")


def probe_insert(instance) -> None:
    """The store's INSERT of any model: its lists and parameters, as run_insert uses them."""
    model = type(instance)
    sql = PROBE_INSERT.format(
        table=connection.ops.quote_name(model._meta.db_table), **store.insert_lists(model, "p")
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, store.insert_params(instance, "p"))
        store.inserted(instance, cursor.fetchone())


def probe_save(instance, names) -> None:
    model = type(instance)
    sql = PROBE_SAVE.format(
        table=connection.ops.quote_name(model._meta.db_table),
        sets=store.set_list(model, "p", PROBE_SAVED),
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql, {"pk": instance.pk, **store.save_params(instance, names, "p", PROBE_SAVED)}
        )


TOKEN = uuid.UUID(int=0xD4)


def without_id(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "id"}


def attributes(instance) -> dict[str, Any]:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def test_any_models_insert_writes_what_save_writes_and_lets_the_database_fill_its_defaults(clock):
    with probe_model() as probe:
        mine = probe(size=5)
        theirs = probe(size=5, token=mine.token)  # the callable default's value, the same
        assert isinstance(mine.count, DatabaseDefault)

        probe_insert(mine)
        theirs.save()

        via_store, via_orm = stored(probe, id=mine.pk), stored(probe, id=theirs.pk)
        assert mine.pk != theirs.pk  # numbered by the database, read back
        assert without_id(via_store) == without_id(via_orm)
        assert (via_store["count"], via_store["shade"], via_store["mixed"]) == (7, "teal", 3)
        assert (via_store["twice"], via_store["label"], via_store["created"]) == (14, "plain", T0)
        assert via_store["at"] is not None
        # The instance knows what the database filled in, as after save().
        assert without_id(attributes(mine)) == without_id(attributes(theirs))
        assert (mine.count, mine.shade) == (7, "teal")


def test_any_models_save_of_some_fields_writes_what_save_update_fields_writes(clock):
    with probe_model() as probe:
        mine, theirs = probe(token=TOKEN), probe(token=TOKEN)
        mine.save()
        theirs.save()
        for row in (mine, theirs):
            row.label, row.count, row.size, row.data = "changed", 21, 99, {"a": 1}
        clock.at = T1

        probe_save(mine, ["label", "count", "data", "updated"])
        theirs.save(update_fields=["label", "count", "data", "updated"])

        via_store, via_orm = stored(probe, id=mine.pk), stored(probe, id=theirs.pk)
        assert without_id(via_store) == without_id(via_orm)
        assert (via_store["label"], via_store["twice"], via_store["size"]) == ("changed", 42, None)
        assert (via_store["updated"], via_store["created"]) == (T1, T0)


def test_a_value_of_ones_own_for_a_database_default_is_refused_and_nothing_written(clock):
    with probe_model() as probe:
        with pytest.raises(ValueError, match="inserts the database's default"):
            probe_insert(probe(count=5))
        with pytest.raises(TypeError, match="not expressions"):
            probe_insert(probe(label=Lower(Value("X"))))
        with pytest.raises(ValueError, match="numbers id"):
            probe_insert(probe(id=5))
        assert probe.objects.count() == 0


def test_the_run_and_action_inserts_leave_nothing_to_the_database():
    """The statements' lists for the runtime's own tables (no db_default there today)."""
    for model in (AgentRun, Action):
        lists = store.insert_lists(model, "x")
        assert "DEFAULT" not in lists["insert_values"]
        assert lists["returning"] == '"id"'
        assert lists["insert_columns"].count(",") + 1 == len(model._meta.concrete_fields)


# --- Reads: the store's rows are the querysets' ---------------------------------------------


def action_at(run, turn: int, index: int, **columns) -> Action:
    action = action_create(run, **columns)
    Action.objects.filter(pk=action.pk).update(turn=turn, call_index=index)
    return Action.objects.get(pk=action.pk)


def same_instance(have, want) -> None:
    for field in type(want)._meta.concrete_fields:
        assert getattr(have, field.attname) == getattr(want, field.attname), field.name


@pytest.mark.parametrize("lock", [False, True])
def test_a_run_with_its_subject_reads_as_select_related_does(e17, lock):
    run = run_create(e17, status="running")
    with transaction.atomic():
        got = store.run_with_subject(run.pk, lock=lock)
    want = AgentRun.objects.select_related("subject").get(pk=run.pk)
    same_instance(got, want)
    same_instance(got.subject, want.subject)
    assert store.run_with_subject(uuid.uuid4()) is None


def test_a_runs_actions_read_as_the_queryset_orders_them(e17, e23):
    run = run_create(e17, status="running")
    for turn, index in ((2, 0), (1, 1), (1, 0), (3, 5)):
        action_at(run, turn, index)
    action_create(run_create(e23, status="running"))  # another run's

    for turn, want in (
        (None, run.actions.order_by("turn", "call_index")),
        (1, run.actions.filter(turn=1).order_by("turn", "call_index")),
    ):
        got = store.run_actions(run, turn=turn)
        assert [a.pk for a in got] == [a.pk for a in want]
        for have, expected in zip(got, want, strict=True):
            same_instance(have, expected)
            assert have.run is run


def test_the_same_succeeded_call_is_the_querysets_first(e17):
    run = run_create(e17, status="running")
    for turn, index in ((2, 0), (1, 3), (1, 2)):
        action_at(run, turn, index, tool="reserve_room", status="succeeded")
    action_at(run, 0, 0, tool="reserve_room", status="failed")  # earlier, but not succeeded
    again = action_at(run, 3, 0, tool="reserve_room", status="running")

    want = (
        Action.objects.filter(
            run=run, tool="reserve_room", params_digest=again.params_digest, status="succeeded"
        )
        .exclude(pk=again.pk)
        .order_by("turn", "call_index")
        .first()
    )

    same_instance(store.action_same_succeeded(again), want)


def test_the_run_detail_is_what_the_orm_reads_of_the_run_its_events_and_receipts(e17, e23):
    run = run_create(e17, status="succeeded")
    action_create(run, tool="find_available_rooms", result={"data": {"rooms": ["R7"]}})
    write = action_create(run, tool="reserve_room", result={"ok": True, "data": {"id": "B-1"}})
    action_create(run, tool="reserve_room", status="failed", result={"data": {"id": "B-2"}})
    action_create(run, tool="reserve_room", result={"ok": True})  # no receipt
    trace_append(run=run, kind=EventKind.RUN_FINISHED, payload={"status": "succeeded"})

    got = run_detail_for_user(run_id=run.pk, user=e17)

    run.refresh_from_db()
    writes = run.actions.filter(readonly=False, status="succeeded").order_by("turn", "call_index")
    assert got == RunDetail(
        run_id=run.pk,
        kind=run.kind,
        status=run.status,
        outcome=run.outcome,
        reply=run.reply,
        goal=run.goal,
        conversation_id=run.conversation_id,
        delegation=run.delegation,
        turn=run.turn,
        created_at=run.created_at,
        finished_at=run.finished_at,
        events=[event_json(e) for e in run.events.order_by("seq")],
        receipts=[
            {"tool": a.tool, "receipt": a.result["data"]} for a in writes if "data" in a.result
        ],
    )
    assert got.receipts == [{"tool": "reserve_room", "receipt": {"id": "B-1"}}]
    assert write.pk
    assert run_detail_for_user(run_id=run.pk, user=e23) is None  # not theirs
