"""A whole run with AGENT_MODEL=openai against a local OpenAI-compatible endpoint, through the
real worker: the model's tool calls go through the same gate, and a lying final message does
not change what the user is told."""

from __future__ import annotations

import json

import pytest

from agentops.runtime.runs import run_start
from bookings.models import Booking, Room
from tests.agentops.planners.test_openai_adapter import endpoint, text_reply, tool_calls_reply  # noqa: F401
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=6)
REQUEST = f"book a room on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"


@pytest.fixture
def openai_settings(settings, endpoint):  # noqa: F811
    settings.OPENAI_BASE_URL = endpoint.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.OPENAI_MODEL = "test-model"
    return endpoint


def test_openai_model_books_through_the_gate(worker, e17, openai_settings):
    fake = openai_settings
    search = {
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": 3,
        "equipment": ["projector"],
    }
    version = Room.objects.get(code="R7").schedule_version
    reserve = search | {"room_id": "R7", "expected_version": version}
    fake.reply(200, tool_calls_reply(("find_available_rooms", json.dumps(search))))
    # The model smuggles an identity field first: refused; then proposes the clean call.
    fake.reply(
        200, tool_calls_reply(("reserve_room", json.dumps(reserve | {"requester_id": "E23"})))
    )
    fake.reply(200, tool_calls_reply(("reserve_room", json.dumps(reserve))))
    fake.reply(200, text_reply("Done! I booked R9 for you."))  # a wrong claim

    run = wait_for_run(run_start(user=e17, request_text=REQUEST, model="openai").pk)

    assert run.status == "succeeded", run.reply
    booking = Booking.objects.get()
    assert (booking.room.code, booking.requester) == ("R7", e17)
    assert [a.status for a in run.actions.order_by("turn")] == [
        "succeeded",
        "rejected",
        "succeeded",
    ]
    assert "R7" in run.reply and booking.code in run.reply and "R9" not in run.reply
    # The model saw the refusal and the tool results as tool messages, in order.
    last = fake.requests[-1]["messages"]
    tool_messages = [m for m in last if m["role"] == "tool"]
    assert len(tool_messages) == 3
    assert json.loads(tool_messages[1]["content"])["code"] == "schema_violation"
    sent_tools = {t["function"]["name"] for t in fake.requests[0]["tools"]}
    assert sent_tools == set(run.delegation["tools"])


def test_openai_model_unavailable_ends_the_run_without_a_booking(worker, e17, openai_settings):
    openai_settings.reply(500, {"error": {"message": "boom"}})
    openai_settings.reply(500, {"error": {"message": "boom"}})
    openai_settings.reply(500, {"error": {"message": "boom"}})

    run = wait_for_run(run_start(user=e17, request_text=REQUEST, model="openai").pk, timeout=60)

    assert run.status == "failed" and run.outcome == "model_unavailable"
    assert Booking.objects.count() == 0
    assert run.reply.startswith("Nothing was booked")


def test_tool_calls_written_as_text_go_through_the_same_gate(worker, e17, openai_settings):
    """A local model that writes its calls as JSON text: each is a proposal the gate checks as
    any other (the smuggled identity refused), and the reply comes from the verified receipt."""
    fake = openai_settings
    search = {
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": 3,
        "equipment": ["projector"],
    }
    version = Room.objects.get(code="R7").schedule_version
    reserve = search | {"room_id": "R7", "expected_version": version}
    fake.reply(200, text_reply(json.dumps({"name": "find_available_rooms", "arguments": search})))
    smuggled = {"name": "reserve_room", "arguments": reserve | {"requester_id": "E23"}}
    fake.reply(200, text_reply("<tool_call>" + json.dumps(smuggled) + "</tool_call>"))
    fake.reply(
        200,
        text_reply(
            "```json\n" + json.dumps({"name": "reserve_room", "arguments": reserve}) + "\n```"
        ),
    )
    fake.reply(200, text_reply("Done! I booked R9 for you."))

    run = wait_for_run(run_start(user=e17, request_text=REQUEST, model="openai").pk)

    assert run.status == "succeeded", run.reply
    booking = Booking.objects.get()
    assert (booking.room.code, booking.requester) == ("R7", e17)
    assert [a.status for a in run.actions.order_by("turn")] == [
        "succeeded",
        "rejected",
        "succeeded",
    ]
    assert booking.code in run.reply and "R9" not in run.reply
