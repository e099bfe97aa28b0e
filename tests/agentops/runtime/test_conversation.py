"""A person's assistant runs form conversations: a run continuing one is read with its earlier
turns (copied to the run when it starts, given to the model), never with someone else's, and
the API takes and answers the conversation's id."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from agentops.models import AgentRun
from agentops.runtime.model_context import build_context
from agentops.runtime.runs import RunKeyReused, run_start
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

RUNS = "/api/runs"


def _request() -> str:
    start, _ = slot()
    return f"book a room on {start:%Y-%m-%d} 14:00-15:00 for 3 people with a projector"


def test_a_run_that_continues_a_conversation_is_read_with_its_earlier_turns(worker, e17):
    first = wait_for_run(run_start(user=e17, request_text="how many rooms?").pk)
    second = run_start(user=e17, request_text=_request(), conversation_id=first.conversation_id)

    assert first.conversation_id is not None and first.conversation == []
    second.refresh_from_db()
    assert second.conversation_id == first.conversation_id
    [turn] = second.conversation
    assert turn["request"] == "how many rooms?"
    assert turn["reply"] == first.reply and turn["outcome"] == first.status
    assert turn["understood"] == first.events.get(seq=1).payload["understood"]
    context = build_context(second)
    assert [t.request for t in context.conversation] == ["how many rooms?"]
    assert context.goal == second.goal
    wait_for_run(second.pk)


def test_a_new_run_starts_its_own_conversation(worker, e17):
    one = run_start(user=e17, request_text=_request())
    two = run_start(user=e17, request_text="what did I book?")

    assert (
        one.conversation_id and two.conversation_id and one.conversation_id != two.conversation_id
    )
    assert build_context(two).conversation == ()
    wait_for_run(one.pk)
    wait_for_run(two.pk)


def test_someone_elses_conversation_gives_no_turns(worker, e17, e23):
    theirs = wait_for_run(run_start(user=e17, request_text="book R7 tomorrow 3pm").pk)
    mine = run_start(user=e23, request_text="yes, book it", conversation_id=theirs.conversation_id)

    mine.refresh_from_db()
    assert mine.conversation == []  # nothing of e17's request reaches e23's run
    assert build_context(mine).conversation == ()
    wait_for_run(mine.pk)


def test_the_same_key_in_another_conversation_is_another_request(worker, e17):
    run = run_start(user=e17, request_text=_request(), idempotency_key="k-1")

    with pytest.raises(RunKeyReused):
        run_start(
            user=e17, request_text=_request(), idempotency_key="k-1", conversation_id=uuid.uuid4()
        )
    assert AgentRun.objects.count() == 1
    wait_for_run(run.pk)


def _post(client: Client, body: dict) -> object:
    return client.post(RUNS, json.dumps(body), content_type="application/json")


def test_the_api_takes_and_answers_the_conversation_id(worker, e17):
    client = Client()
    client.force_login(e17)
    started = _post(client, {"request": "how many rooms?"})
    conversation = started.json()["conversation_id"]
    wait_for_run(started.json()["run_id"])

    again = _post(client, {"request": _request(), "conversation_id": conversation})

    assert again.status_code == 202
    assert again.json()["conversation_id"] == conversation
    detail = client.get(f"{RUNS}/{again.json()['run_id']}").json()
    assert detail["conversation_id"] == conversation
    wait_for_run(again.json()["run_id"])


@pytest.mark.parametrize("bad", ["not-a-uuid", 42, "", "0" * 37, None])
def test_a_conversation_id_that_is_not_a_uuid_is_refused_and_starts_nothing(worker, e17, bad):
    client = Client()
    client.force_login(e17)
    body = {"request": "how many rooms?", "conversation_id": bad}
    if bad is None:
        body = {"request": "how many rooms?", "conversation": "x"}  # an unknown field

    answer = _post(client, body)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] in ("invalid_conversation_id", "invalid_body")
    assert AgentRun.objects.count() == 0
