"""A 2026-07-28 client's wait for an approver, in-process (agentops.runtime.mcp_waits): a
requestState's nonce is taken once even by two requests at the same moment, it names only its
own call and subject, and the sweeper forgets handles past their expiry."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agentops.models import Action, McpHandle
from agentops.runtime import sweeper
from agentops.runtime.mcp_sessions import mcp_call
from agentops.runtime.mcp_waits import state_mint, state_redeem, task_create, task_get
from bookings.models import Room
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


def waiting_call(user) -> tuple[dict, str]:
    start, end = slot(days=3)
    arguments = {
        "room_id": "R16",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": 3,
        "expected_version": Room.objects.get(code="R16").schedule_version,
    }
    envelope = mcp_call(
        user_id=user.pk,
        session_id=None,
        name="reserve_room",
        arguments=arguments,
        idempotency_key=None,
    )
    assert envelope["code"] == "approval_pending", envelope
    return arguments, envelope["pending"]["action_id"]


def test_two_requests_with_one_state_at_once_one_is_answered(transactional_db, e17):
    arguments, action_id = waiting_call(e17)
    state = state_mint(user_id=e17.pk, action_id=action_id)
    barrier = threading.Barrier(2)
    answers: list = [None, None]

    def redeem(i: int) -> None:
        try:
            connection.ensure_connection()
            barrier.wait(timeout=30)
            answers[i] = state_redeem(
                user_id=e17.pk, state=state, name="reserve_room", arguments=arguments
            )
        except BaseException as exc:  # the test inspects both
            answers[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=redeem, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert sorted(answers, key=lambda a: a is None) == [(action_id, None), None], answers
    assert McpHandle.objects.get().used_at is not None


def test_a_state_names_only_its_own_call_and_subject(transactional_db, e17, e23):
    arguments, action_id = waiting_call(e17)
    state = state_mint(user_id=e17.pk, action_id=action_id)

    assert (
        state_redeem(user_id=e23.pk, state=state, name="reserve_room", arguments=arguments) is None
    )
    other = arguments | {"attendees": 5}
    assert state_redeem(user_id=e17.pk, state=state, name="reserve_room", arguments=other) is None
    assert (
        state_redeem(user_id=e17.pk, state="{}", name="reserve_room", arguments=arguments) is None
    )
    assert state_redeem(user_id=e17.pk, state="[", name="reserve_room", arguments=arguments) is None
    assert McpHandle.objects.get().used_at is None  # none of these used it
    assert state_redeem(user_id=e17.pk, state=state, name="reserve_room", arguments=arguments) == (
        action_id,
        None,
    )
    with pytest.raises(Action.DoesNotExist):  # another subject's action cannot get a state
        state_mint(user_id=e23.pk, action_id=action_id)


def test_the_sweeper_forgets_states_and_tasks_past_their_expiry(transactional_db, e17):
    _, action_id = waiting_call(e17)
    state_mint(user_id=e17.pk, action_id=action_id)
    task_id = task_create(user_id=e17.pk, action_id=action_id)["taskId"]
    assert task_get(user_id=e17.pk, task_id=task_id)["status"] == "working"
    assert sweeper.sweep()["expired_mcp_handles"] == 0

    McpHandle.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert task_get(user_id=e17.pk, task_id=task_id) is None  # expired reads as unknown
    assert sweeper.sweep()["expired_mcp_handles"] == 2
    assert McpHandle.objects.count() == 0 and Action.objects.filter(pk=action_id).exists()


def test_a_retry_over_the_call_limit_is_yellow_and_keeps_its_state(transactional_db, e17, settings):
    arguments, action_id = waiting_call(e17)
    state = state_mint(user_id=e17.pk, action_id=action_id)
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 0

    limited = state_redeem(user_id=e17.pk, state=state, name="reserve_room", arguments=arguments)
    assert limited is not None and limited[0] == action_id
    assert (limited[1]["signal"], limited[1]["code"]) == ("yellow", "rate_limited")
    assert McpHandle.objects.get().used_at is None  # the retry after may still use it


def test_a_task_whose_write_is_unclear_stays_working_until_an_operator_settles_it(
    transactional_db, e17
):
    _, action_id = waiting_call(e17)
    task_id = task_create(user_id=e17.pk, action_id=action_id)["taskId"]
    Action.objects.filter(pk=action_id).update(status="unknown_outcome")

    task = task_get(user_id=e17.pk, task_id=task_id)
    assert task["status"] == "working" and "operator" in task["statusMessage"]
    assert "envelope" not in task
    Action.objects.filter(pk=action_id).update(
        status="succeeded", result={"ok": True, "signal": "green", "data": {"booking_id": "B9"}}
    )
    done = task_get(user_id=e17.pk, task_id=task_id)
    assert done["status"] == "completed" and done["envelope"]["data"]["booking_id"] == "B9"
