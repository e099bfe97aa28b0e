"""agentops.runtime.store: the runtime's hand-written reads return what the ORM would."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.utils import timezone

from accounts.selectors import user_roles
from agentops.models import Action, AgentRun
from agentops.runtime.store import action_same_succeeded, run_action_locked, turn_claim
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
