"""A local planner's step (the rules planner, the scripted one: Planner.local) is planned inside
the transaction that claims its turn: the claim, the step's events, its proposals and the start
of its call commit together, or none of them does. A step's event goes in with its first
proposal's (store.ACTION_INSERT_EVENTS_SQL). A planner that fails ends the run as a model error,
whatever the step it fails in."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from agentops.models import Action, AgentRun, EventKind, TraceEvent
from agentops.runtime import proposals, queue, steps
from agentops.runtime.runs import run_start
from bookings.models import Booking
from tests.conftest import slot
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


def _request(days: int) -> str:
    start, end = slot(days=days)
    return (
        f"Book a room on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people with a projector"
    )


def _in_place(monkeypatch) -> None:
    """The run's steps and calls go on in this process; nothing is sent to the broker."""
    monkeypatch.setattr(queue, "_send", lambda name, args, countdown=None: None)


@pytest.mark.django_db(transaction=True)
def test_a_rules_run_records_each_step_with_its_first_proposal(e17, monkeypatch):
    _in_place(monkeypatch)
    run = run_start(user=e17, request_text=_request(4))
    steps.run_step(run.pk, 1)

    run.refresh_from_db()
    assert run.status == "succeeded" and run.outcome == "verified", run.reply
    assert run.turn == 3
    kinds = list(run.events.order_by("seq").values_list("kind", "seq"))
    assert [k for k, _ in kinds].count(EventKind.MODEL_STEP) == 3
    # Every step that proposed: its event, then its first proposal's gate event.
    gates = [seq for kind, seq in kinds if kind == EventKind.GATE]
    assert all((EventKind.MODEL_STEP, seq - 1) in kinds for seq in gates)
    assert [a.tool for a in run.actions.order_by("turn")] == [
        "find_available_rooms",
        "reserve_room",
    ]
    assert Booking.objects.filter(requester=e17, status="confirmed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_step_that_fails_after_its_claim_leaves_no_claim_and_nothing_recorded(e17, monkeypatch):
    """The claim is in the step's transaction: a step that fails while recording its
    proposals leaves the run as it was, for the sweeper to step again."""
    _in_place(monkeypatch)

    def broken(**kwargs):
        raise RuntimeError("the gate's record failed")

    monkeypatch.setattr(steps, "proposal_record", broken)
    run = run_start(user=e17, request_text=_request(5))
    events = run.events.count()

    with pytest.raises(RuntimeError):
        steps.run_step(run.pk, 1)

    run.refresh_from_db()
    assert run.turn == 0 and run.status == "running"
    assert run.events.count() == events
    assert not run.actions.exists()
    monkeypatch.setattr(steps, "proposal_record", proposals.proposal_record)
    steps.run_step(run.pk, 1)  # the step again, as the sweeper sends it
    run.refresh_from_db()
    assert run.status == "succeeded" and run.outcome == "verified"


def test_a_role_removed_while_the_call_runs_applies_to_the_next_step(worker, e17):
    run = _searching(e17, days=6)
    e17.groups.remove(Group.objects.get(name="employees"))
    release_faults(run.pk)
    run = wait_for_run(run.pk)

    assert Booking.objects.count() == 0
    assert not Action.objects.filter(run=run, tool="reserve_room", status="succeeded").exists()
    assert not TraceEvent.objects.filter(
        run=run, kind="execution_started", action__tool="reserve_room"
    ).exists()
    assert run.outcome != "verified"


def test_a_run_past_its_deadline_after_a_call_ends_as_its_claim_finds_it(worker, e17):
    run = _searching(e17, days=7)
    AgentRun.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    release_faults(run.pk)
    run = wait_for_run(run.pk)

    assert run.status == "failed" and run.outcome == "budget_exhausted"
    assert run.turn == 1
    assert not run.events.filter(kind=EventKind.MODEL_STEP, payload__turn=2).exists()
    assert Booking.objects.count() == 0


def _searching(user, *, days: int) -> AgentRun:
    """A rules run whose search is running, held there by an injected pause."""
    run = run_start(
        user=user,
        request_text=_request(days),
        faults=[{"tool": "find_available_rooms", "kind": "pause"}],
    )
    wait_until(
        lambda: Action.objects.filter(run=run, status="running").exists(), message="search running"
    )
    return run


@pytest.mark.django_db(transaction=True)
def test_a_planner_that_cannot_be_made_ends_the_run_as_a_model_error(e17, monkeypatch):
    _in_place(monkeypatch)

    def unconfigured(run):
        raise RuntimeError("no model endpoint")

    monkeypatch.setattr(steps, "planner_for", unconfigured)
    run = run_start(user=e17, request_text=_request(10))
    steps.run_step(run.pk, 1)  # raises nothing: the run ends

    run.refresh_from_db()
    assert run.status == "failed" and run.outcome == "model_unavailable"
    assert run.events.filter(kind=EventKind.MODEL_ERROR, payload__turn=1).count() == 1
    assert not run.actions.exists()


@pytest.mark.django_db(transaction=True)
def test_a_planner_that_fails_at_a_later_step_keeps_the_calls_before_it(e17, monkeypatch):
    _in_place(monkeypatch)
    real = steps.planner_for

    class FailsAfterTheFirstStep:
        local = True
        name = "rules"

        def __init__(self, run):
            self.inner = real(run)

        def propose(self, ctx):
            if ctx.turn > 1:
                raise RuntimeError("the model fell over")
            return self.inner.propose(ctx)

    monkeypatch.setattr(steps, "planner_for", FailsAfterTheFirstStep)
    run = run_start(user=e17, request_text=_request(11))
    steps.run_step(run.pk, 1)

    run.refresh_from_db()
    search = run.actions.get()
    assert search.tool == "find_available_rooms" and search.status == "succeeded"
    assert run.status == "failed" and run.outcome == "model_unavailable"
    assert run.events.filter(kind=EventKind.MODEL_ERROR, payload__turn=2).count() == 1
    assert Booking.objects.count() == 0


def _claims_counted(monkeypatch) -> list[int]:
    """The turns claimed with a statement of their own (store.turn_claim), in order."""
    claimed: list[int] = []
    claim = steps.turn_claim

    def counting(run_id, turn, **kwargs):
        claimed.append(turn)
        return claim(run_id, turn, **kwargs)

    monkeypatch.setattr(steps, "turn_claim", counting)
    return claimed


@pytest.mark.django_db(transaction=True)
def test_a_call_that_ends_its_turn_plans_the_next_step_in_its_own_transaction(e17, monkeypatch):
    """runs.next_step: the call's end, the next turn's claim and that step commit together.
    Only turn 1 is claimed with a statement of its own; turns 2 and 3 are taken under the call's
    end's lock, and saved with the step's first save of the run (store.run_turn_take)."""
    _in_place(monkeypatch)
    claimed = _claims_counted(monkeypatch)
    run = run_start(user=e17, request_text=_request(6))
    steps.run_step(run.pk, 1)

    run.refresh_from_db()
    assert run.status == "succeeded" and run.outcome == "verified", run.reply
    assert claimed == [1]
    assert run.turn == 3  # each turn taken here was saved
    turns = list(run.actions.order_by("turn").values_list("turn", "tool", "status"))
    assert turns == [(1, "find_available_rooms", "succeeded"), (2, "reserve_room", "succeeded")]
    kinds = list(run.events.order_by("seq").values_list("kind", flat=True))
    assert kinds.count(EventKind.MODEL_STEP) == 3
    # Each step's event comes after the end of the call before it, in one numbered sequence.
    finished = [i for i, k in enumerate(kinds) if k == EventKind.EXECUTION_FINISHED]
    steps_at = [i for i, k in enumerate(kinds) if k == EventKind.MODEL_STEP]
    assert finished[0] < steps_at[1] and finished[1] < steps_at[2]
    assert [e.seq for e in run.events.order_by("seq")] == list(range(1, len(kinds) + 1))
    assert Booking.objects.filter(requester=e17, status="confirmed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_next_step_whose_statement_fails_leaves_the_calls_end_recorded(e17, monkeypatch):
    """The step planned in a call's end fails on a statement: that transaction is lost, the
    call's outcome is recorded again without the step, and the step is claimed after the commit
    as before. The run goes on to book what was asked, once."""
    from django.db import DatabaseError

    _in_place(monkeypatch)
    apply = steps._apply_locked
    failed: list[int] = []

    def failing_once(run, actions, turn, step, roles):
        if turn == 2 and not failed:
            failed.append(turn)
            raise DatabaseError("the step's statement failed")
        return apply(run, actions, turn, step, roles)

    monkeypatch.setattr(steps, "_apply_locked", failing_once)
    claimed = _claims_counted(monkeypatch)
    run = run_start(user=e17, request_text=_request(7))
    steps.run_step(run.pk, 1)

    run.refresh_from_db()
    assert failed == [2]
    assert claimed == [1, 2]  # turn 2 claimed after the search's end committed alone
    assert run.status == "succeeded" and run.outcome == "verified", run.reply
    search = run.actions.get(turn=1)
    assert search.status == "succeeded" and search.result is not None
    assert run.events.filter(kind=EventKind.EXECUTION_FINISHED, action=search).count() == 1
    assert Booking.objects.filter(requester=e17, status="confirmed").count() == 1
