"""An MCP session's run (kind mcp) in-process: its budgets and loop detection end it, the sweeper
never plans a step for it, and ends it after its deadline once nothing in it waits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.models import AgentRun
from agentops.runtime import sweeper
from agentops.runtime.mcp_sessions import mcp_call, mcp_session_run
from agentops.runtime.timing import LOOP_LIMIT, stale_after

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


def call(user, name="get_booking", arguments=None, session="s-1"):
    return mcp_call(
        user_id=user.pk,
        session_id=session,
        name=name,
        arguments=arguments if arguments is not None else {"booking_id": "B999"},
        idempotency_key=None,
    )


def test_the_same_call_repeated_ends_the_session_with_loop_detected(transactional_db, e17):
    answers = [call(e17) for _ in range(LOOP_LIMIT)]

    assert [a["reason"] for a in answers[:-1]] == ["not_found"] * (LOOP_LIMIT - 1)
    assert answers[-1]["reason"] == "loop_detected"
    run = AgentRun.objects.get()
    assert (run.kind, run.status, run.outcome) == ("mcp", "failed", "loop_detected")
    assert call(e17, arguments={"booking_id": "B1"})["code"] == "session_ended"
    assert run.actions.count() == LOOP_LIMIT  # nothing more was proposed in the ended run


def test_a_session_run_belongs_to_the_subject_that_opened_it(transactional_db, e17, e23):
    call(e17)

    with pytest.raises(PermissionError):
        mcp_session_run(user=e23, session_id="s-1")
    assert AgentRun.objects.filter(subject=e23).count() == 0


def test_the_sweeper_never_steps_an_idle_session_and_ends_it_after_its_deadline(
    transactional_db, e17
):
    call(e17, arguments={"booking_id": "B1"})
    run = AgentRun.objects.get()
    AgentRun.objects.filter(pk=run.pk).update(
        updated_at=timezone.now() - stale_after() - timedelta(seconds=1)
    )

    counts = sweeper.sweep()
    assert counts["steps"] == 0 and counts["ended_sessions"] == 0
    assert AgentRun.objects.get().status == "running"

    AgentRun.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    assert sweeper.sweep()["ended_sessions"] == 1
    run.refresh_from_db()
    assert (run.status, run.outcome) == ("succeeded", "session_ended")
