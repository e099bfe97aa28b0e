"""A step claims its turn once: late or early step messages never plan over a call in flight,
not even when the run's deadline has passed (the budget path checks what the claim checks)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agentops.models import Action, AgentRun, EventKind, IdempotencyRecord
from agentops.runtime import recorder, registry, steps
from agentops.runtime import runs as runs_module
from agentops.runtime.runs import run_start
from bookings.models import Room
from tests.conftest import slot
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=3)
REQUEST = f"Book a room on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"


def test_step_messages_past_the_deadline_do_not_end_a_run_with_a_call_in_flight(worker, e17):
    run = run_start(
        user=e17, request_text=REQUEST, faults=[{"tool": "find_available_rooms", "kind": "pause"}]
    )
    wait_until(
        lambda: Action.objects.filter(run=run, status="running").exists(), message="search running"
    )
    AgentRun.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    events = run.events.count()

    steps.run_step(run.pk, 1)  # a duplicate of the turn being executed
    steps.run_step(run.pk, 2)  # a step message before its turn's call has finished

    run.refresh_from_db()
    assert run.status == "running" and run.turn == 1
    assert run.events.count() == events
    assert not run.events.filter(kind=EventKind.BUDGET_EXHAUSTED).exists()

    release_faults(run.pk)
    run = wait_for_run(run.pk)  # the next step finds the deadline gone and ends the run
    search = run.actions.get()
    assert search.status == "succeeded"
    assert run.status == "failed" and run.outcome == "budget_exhausted"
    assert run.events.filter(kind=EventKind.BUDGET_EXHAUSTED).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_steps_write_starts_with_its_intent_committed_in_one_transaction(e17, monkeypatch):
    """The step that proposes a write starts it and claims its idempotency key in its own
    transaction: when the tool runs (on its own thread and database connection), the running
    action and the key in progress are both committed, and the call holds the key."""
    spec = registry.get("reserve_room")
    seen: dict[str, object] = {}

    def observing(ctx, args):
        action = Action.objects.get(run_id=ctx.run_id, tool="reserve_room")
        seen["action"] = action.status
        seen["key"] = IdempotencyRecord.objects.get(key=action.idempotency_key).status
        return spec.handler(ctx, args)

    monkeypatch.setitem(
        registry._TOOLS, "reserve_room", dataclasses.replace(spec, handler=observing)
    )
    monkeypatch.setattr(runs_module, "enqueue_step", lambda run_id, turn: None)  # run in place
    claim = recorder.idempotency_claim

    def claim_in(**kwargs):
        seen["claimed_in_transaction"] = connection.in_atomic_block
        return claim(**kwargs)

    monkeypatch.setattr(recorder, "idempotency_claim", claim_in)
    arguments = {
        "room_id": "R7",
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": 3,
        "equipment": ["projector"],
        "expected_version": Room.objects.get(code="R7").schedule_version,
    }
    script = [
        {"proposals": [{"tool": "reserve_room", "arguments": arguments}]},
        {"message": "done", "outcome": "done"},
    ]
    run = run_start(user=e17, request_text=REQUEST, model="scripted", script=script)

    steps.run_step(run.pk, 1)  # the call and the next step go on in this process

    assert seen == {"claimed_in_transaction": True, "action": "running", "key": "in_progress"}
    action = Action.objects.get(run=run)
    assert action.status == "succeeded"
    assert IdempotencyRecord.objects.get(key=action.idempotency_key).status == "completed"
    run.refresh_from_db()
    assert run.status == "succeeded"
