"""A step claims its turn once: late or early step messages never plan over a call in flight,
not even when the run's deadline has passed (the budget path checks what the claim checks)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.models import Action, AgentRun, EventKind
from agentops.runtime import steps
from agentops.runtime.runs import run_start
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
