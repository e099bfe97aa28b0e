"""Authorization, scope, risk and the proposal deadline are checked again right before an
action executes, not only when it was proposed. A scripted run proposes a paused read and a
write in the same turn; the write waits for the read, and the world changes in between."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from agentops.models import Action, TraceEvent
from agentops.runtime.runs import run_start
from bookings.models import Booking, Room
from tests.agentops.runtime.test_gate import REQUEST, find, reserve
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


def _paused_run(user):
    """A run whose write is queued behind a read paused by an injected fault."""
    run = run_start(
        user=user,
        request_text=REQUEST,
        model="scripted",
        script=[{"proposals": [find(), reserve("R7")]}],
        faults=[{"tool": "find_available_rooms", "kind": "pause"}],
    )
    wait_until(
        lambda: Action.objects.filter(run=run, tool="find_available_rooms", status="running"),
        message="the paused read to start",
    )
    write = Action.objects.get(run=run, tool="reserve_room")
    assert write.status == "queued"
    return run, write


def _refused_before_running(run, write, code: str) -> None:
    release_faults(run.pk)
    wait_for_run(run.pk)
    write.refresh_from_db()
    assert write.status == "rejected"
    assert write.result["code"] == code
    assert write.attempts == 0
    assert TraceEvent.objects.filter(action=write, kind="precheck_refused").exists()
    assert not TraceEvent.objects.filter(action=write, kind="execution_started").exists()
    assert Booking.objects.count() == 0


def test_a_role_removed_after_the_proposal_stops_the_write(worker, e17):
    run, write = _paused_run(e17)
    e17.groups.remove(Group.objects.get(name="employees"))
    _refused_before_running(run, write, "tool_not_visible")


def test_a_room_that_now_needs_approval_stops_the_write(worker, e17):
    run, write = _paused_run(e17)
    Room.objects.filter(code="R7").update(requires_approval=True)
    _refused_before_running(run, write, "risk_raised")


def test_a_write_past_its_proposal_deadline_does_not_execute(worker, e17):
    run, write = _paused_run(e17)
    Action.objects.filter(pk=write.pk).update(
        proposal_deadline=timezone.now() - timedelta(seconds=1)
    )
    _refused_before_running(run, write, "proposal_expired")


def test_an_unchanged_world_lets_the_write_run(worker, e17):
    run, write = _paused_run(e17)
    release_faults(run.pk)
    wait_for_run(run.pk)
    write.refresh_from_db()
    assert write.status == "succeeded"
    assert Booking.objects.get().room.code == "R7"
