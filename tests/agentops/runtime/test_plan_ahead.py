"""A local planner's next step is planned while the call before it is recorded, and applied in
the transaction that records the call (agentops.runtime.steps.plan_ahead): the same events, the
same booking, the same checks as a step of its own, with fewer statements; whatever changed
since it was planned (the roles, the run, the deadline) leaves the step to a step of its own."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone

from agentops.models import Action, AgentRun, EventKind, TraceEvent
from agentops.runtime import queue, steps
from agentops.runtime import runs as runs_module
from agentops.runtime.runs import run_start
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from bookings.models import Booking
from tests.conftest import slot
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


def _request(days: int) -> str:
    start, end = slot(days=days)
    return (
        f"Book a room on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people with a projector"
    )


def _run_in_place(user, text: str, monkeypatch) -> tuple[AgentRun, int, int]:
    """The run, carried out in this process from its first step; the turn claims it made and
    the statements this thread's connection sent (the tools' threads have their own)."""
    monkeypatch.setattr(runs_module, "enqueue_step", lambda run_id, turn: None)
    claims: list[int] = []
    claim = steps.turn_claim

    def counting_claim(run_id, turn, **kwargs):
        claims.append(turn)
        return claim(run_id, turn, **kwargs)

    monkeypatch.setattr(steps, "turn_claim", counting_claim)
    sent: list[str] = []

    def counting(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    run = run_start(user=user, request_text=text)
    with connection.execute_wrapper(counting):
        steps.run_step(run.pk, 1)
    return AgentRun.objects.get(pk=run.pk), len(claims), len(sent)


def _kinds(run: AgentRun) -> list[str]:
    return list(run.events.order_by("seq").values_list("kind", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_rules_run_takes_its_later_steps_in_the_transactions_that_record_its_calls(
    e17, monkeypatch
):
    ahead, ahead_claims, ahead_sent = _run_in_place(e17, _request(4), monkeypatch)
    monkeypatch.setattr(steps, "plan_ahead", lambda started, called: None)
    alone, alone_claims, alone_sent = _run_in_place(e17, _request(5), monkeypatch)

    for run in (ahead, alone):
        assert run.status == "succeeded" and run.outcome == "verified", run.reply
        assert run.turn == 3
        assert [a.tool for a in run.actions.order_by("turn")] == [
            "find_available_rooms",
            "reserve_room",
        ]
        assert Booking.objects.filter(requester=e17, status="confirmed").count() >= 1
    # The same story, event for event, and the same turns recorded in them.
    assert _kinds(ahead) == _kinds(alone)
    steps_seen = ahead.events.filter(kind=EventKind.MODEL_STEP).order_by("seq")
    assert [e.payload["turn"] for e in steps_seen] == [1, 2, 3]
    # Only the first step claims its turn by a statement of its own; the two later ones are
    # taken under the lock of the call they follow: one statement less each (and a transaction
    # less: the claim's).
    assert (ahead_claims, alone_claims) == (1, 3)
    assert ahead_sent == alone_sent - 2, (ahead_sent, alone_sent)
    assert Booking.objects.filter(requester=e17, status="confirmed").count() == 2


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


def test_a_role_removed_while_the_call_runs_applies_to_the_step_planned_after_it(worker, e17):
    """The next step was planned with the roles of the step before; the recording reads them
    again under its lock, finds one gone, and leaves the step to a claim of its own, which
    gates the reservation with the roles as they are now: nothing is booked."""
    run = _searching(e17, days=6)
    e17.groups.remove(Group.objects.get(name="employees"))
    release_faults(run.pk)
    run = wait_for_run(run.pk)

    assert Booking.objects.count() == 0
    assert not Action.objects.filter(run=run, tool="reserve_room", status="succeeded").exists()
    assert not TraceEvent.objects.filter(
        run=run, kind="execution_started", action__tool="reserve_room"
    ).exists()
    assert run.status in ("failed", "succeeded") and run.outcome != "verified"


def test_a_run_past_its_deadline_when_the_call_is_recorded_ends_as_a_claim_would_end_it(
    worker, e17
):
    run = _searching(e17, days=7)
    AgentRun.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    release_faults(run.pk)
    run = wait_for_run(run.pk)

    assert run.status == "failed" and run.outcome == "budget_exhausted"
    assert run.turn == 1  # the planned step was not taken
    assert not run.events.filter(kind=EventKind.MODEL_STEP, payload__turn=2).exists()
    assert Booking.objects.count() == 0


def _approved_in_place(e17, a01, text: str, monkeypatch) -> tuple[AgentRun, int]:
    """E17 books R16 (it needs an approval), carried out in this process; a01 approves, and the
    decision's task body runs here too. The run and the turn claims it made."""
    monkeypatch.setattr(queue, "_send", lambda name, args, countdown=None: None)
    claims: list[int] = []
    claim = steps.turn_claim
    monkeypatch.setattr(
        steps,
        "turn_claim",
        lambda run_id, turn, **kw: claims.append(turn) or claim(run_id, turn, **kw),
    )
    run = run_start(user=e17, request_text=text)
    steps.run_step(run.pk, 1)
    pending = ApprovalRequest.objects.get(run_ref=str(run.pk), status="pending")
    assert approval_decide(request_id=pending.pk, approver=a01, approve=True, reason="ok").ok
    runs_module.action_approval_settled(pending.action_ref)  # approval_settled_task's body
    return AgentRun.objects.get(pk=run.pk), len(claims)


@pytest.mark.django_db(transaction=True)
def test_an_approved_call_takes_the_step_after_it_in_the_transaction_that_records_it(
    e17, approver, monkeypatch
):
    start, end = slot(days=8)
    text = f"book R16 on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people"
    ahead, ahead_claims = _approved_in_place(e17, approver, text, monkeypatch)
    monkeypatch.setattr(steps, "plan_ahead", lambda started, called: None)
    start, end = slot(days=9)
    text = f"book R16 on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people"
    alone, alone_claims = _approved_in_place(e17, approver, text, monkeypatch)

    for run in (ahead, alone):
        assert run.status == "succeeded" and run.outcome == "verified", run.reply
        assert (
            Booking.objects.filter(room__code="R16", requester=e17, status="confirmed")
            .filter(idempotency_key=run.actions.get(tool="reserve_room").idempotency_key)
            .exists()
        )
    assert _kinds(ahead) == _kinds(alone)
    # The search's step and the approved write's each took the next step with them.
    assert (ahead_claims, alone_claims) == (1, 3)


@pytest.mark.django_db(transaction=True)
def test_a_planner_that_cannot_be_made_ends_the_run_as_a_model_error(e17, monkeypatch):
    monkeypatch.setattr(queue, "_send", lambda name, args, countdown=None: None)

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
@pytest.mark.parametrize("fails_in", ["propose", "planner_for"])
def test_a_planner_that_fails_when_planning_ahead_never_loses_the_call(e17, monkeypatch, fails_in):
    """The search's answer is recorded whatever the planning ahead meets (the planner raising,
    or not even made); the step of its own then meets the same failure and records it."""
    monkeypatch.setattr(queue, "_send", lambda name, args, countdown=None: None)
    real = steps.planner_for
    made = []

    class FailsAfterTheFirstStep:
        local = True
        name = "rules"

        def __init__(self, run):
            made.append(run.pk)
            if fails_in == "planner_for" and len(made) > 1:
                raise RuntimeError("no model endpoint")
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
    assert search.result["ok"] is True
    assert run.status == "failed" and run.outcome == "model_unavailable"
    assert run.events.filter(kind=EventKind.MODEL_ERROR, payload__turn=2).count() == 1
    assert Booking.objects.count() == 0
