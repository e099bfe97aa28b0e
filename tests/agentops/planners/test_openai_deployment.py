"""The OpenAI-compatible planner fit for a deployment: its limits come from the settings, one
client is shared by a process's threads and the requests in flight are bounded, a single tool
call written as JSON in the message text is read as that proposal (and nothing else is), the
request reader's slots reach the model, and the tools' schemas use patterns a constrained
decoder can enforce."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from agentops.contract import Proposal, Step, exports
from agentops.planners.openai_adapter import (
    PlannerUnavailable,
    from_settings,
    text_tool_call,
)
from agentops.runtime import registry
from tests.agentops.planners.test_openai_adapter import (
    FakeEndpoint,
    make_ctx,
    system_message,
    text_reply,
)

WINDOW = {"start": "2025-03-11T14:00:00+08:00", "end": "2025-03-11T15:00:00+08:00"}
OFFERED = frozenset({"room_search", "booking_reserve"})


@pytest.fixture
def model_settings(settings, endpoint: FakeEndpoint):
    settings.OPENAI_BASE_URL = endpoint.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.OPENAI_MODEL = "test-model"
    settings.OPENAI_MAX_RETRIES = 0
    return settings


# --- limits from the settings ---------------------------------------------------------------


def test_max_tokens_comes_from_the_settings(endpoint: FakeEndpoint, model_settings) -> None:
    model_settings.OPENAI_MAX_TOKENS = 300
    endpoint.reply(200, text_reply("ok"))

    from_settings().propose(make_ctx())

    assert endpoint.last["max_tokens"] == 300


def test_no_max_tokens_is_sent_when_the_setting_is_0(
    endpoint: FakeEndpoint, model_settings
) -> None:
    model_settings.OPENAI_MAX_TOKENS = 0
    endpoint.reply(200, text_reply("ok"))

    from_settings().propose(make_ctx())

    assert "max_tokens" not in endpoint.last


def test_the_timeout_comes_from_the_settings(endpoint: FakeEndpoint, model_settings) -> None:
    model_settings.OPENAI_TIMEOUT_S = 0.3
    endpoint.reply(200, text_reply("too late"), delay_s=1.0)

    with pytest.raises(PlannerUnavailable, match="APITimeoutError"):
        from_settings().propose(make_ctx())


def test_the_sdk_retries_come_from_the_settings(endpoint: FakeEndpoint, model_settings) -> None:
    model_settings.OPENAI_MAX_RETRIES = 1
    model_settings.OPENAI_TIMEOUT_S = 5.0
    for _ in range(2):
        endpoint.reply(500, {"error": {"message": "boom", "type": "server_error"}})

    with pytest.raises(PlannerUnavailable, match="InternalServerError"):
        from_settings().propose(make_ctx())

    assert len(endpoint.requests) == 2  # the request and one retry, no more


def test_planners_of_one_endpoint_share_one_client(model_settings) -> None:
    first = from_settings().client

    assert from_settings().client is first  # one connection pool for the worker's threads
    model_settings.OPENAI_TIMEOUT_S = 7.0
    assert from_settings().client is not first


def _two_at_once(endpoint: FakeEndpoint) -> float:
    for _ in range(2):
        endpoint.reply(200, text_reply("ok"), delay_s=0.4)
    threads = [threading.Thread(target=from_settings().propose, args=(make_ctx(),)) for _ in "ab"]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive(), "a planner thread did not end in 10 s"
    return time.monotonic() - began


def test_requests_in_flight_are_bounded_by_the_settings(
    endpoint: FakeEndpoint,
    model_settings,
) -> None:
    model_settings.OPENAI_MAX_CONCURRENCY = 1

    assert _two_at_once(endpoint) >= 0.8  # one after the other
    assert len(endpoint.requests) == 2


def test_without_a_bound_threads_ask_at_once(endpoint: FakeEndpoint, model_settings) -> None:
    model_settings.OPENAI_MAX_CONCURRENCY = 0

    assert _two_at_once(endpoint) < 0.8


# --- a tool call written as text ------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"name": "room_search", "arguments": WINDOW}),
        "```json\n" + json.dumps({"name": "room_search", "arguments": WINDOW}) + "\n```",
        "<tool_call>\n"
        + json.dumps({"name": "room_search", "arguments": WINDOW})
        + "\n</tool_call>",
        "I will look first. " + json.dumps({"name": "room_search", "parameters": WINDOW}),
        json.dumps({"function": {"name": "room_search", "arguments": json.dumps(WINDOW)}}),
        json.dumps([{"name": "room_search", "arguments": WINDOW}]),
    ],
    ids=["bare", "fenced", "tagged", "after-prose", "arguments-as-string", "in-a-list"],
)
def test_a_single_call_written_as_text_is_that_proposal(
    endpoint: FakeEndpoint,
    model_settings,
    content: str,
) -> None:
    endpoint.reply(200, text_reply(content))

    step = from_settings().propose(make_ctx())

    assert step == Step(proposals=[Proposal(tool="room_search", arguments=WINDOW)])


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"name": "room_search", "arguments": WINDOW})
        + json.dumps({"name": "booking_reserve", "arguments": {"room_id": 7}}),
        json.dumps({"name": "cancel_everything", "arguments": {}}),
        json.dumps({"room_id": 7}),
        'Booked room 7 {"booking_id": "B42"}.',
        "{not json at all",
    ],
    ids=["two-calls", "tool-not-offered", "no-name", "data-in-prose", "broken"],
)
def test_text_that_is_not_one_offered_call_stays_a_message(
    endpoint: FakeEndpoint,
    model_settings,
    content: str,
) -> None:
    endpoint.reply(200, text_reply(content))

    step = from_settings().propose(make_ctx())

    assert step == Step(message=content, outcome="done")


def test_text_calls_are_messages_when_the_setting_is_off(
    endpoint: FakeEndpoint,
    model_settings,
) -> None:
    model_settings.OPENAI_TEXT_TOOL_CALLS = False
    content = json.dumps({"name": "room_search", "arguments": WINDOW})
    endpoint.reply(200, text_reply(content))

    assert from_settings().propose(make_ctx()) == Step(message=content, outcome="done")


def test_garbled_arguments_written_as_text_are_passed_on_unrepaired() -> None:
    content = json.dumps({"name": "booking_reserve", "arguments": '{"room_id": 7,'})

    assert text_tool_call(content, OFFERED) == Proposal(
        tool="booking_reserve", arguments={"_unparseable_arguments": '{"room_id": 7,'}
    )


# --- the reader's slots as context ----------------------------------------------------------


@pytest.mark.django_db
def test_the_readers_slots_reach_the_model(
    endpoint: FakeEndpoint,
    model_settings,
    rooms,
) -> None:
    endpoint.reply(200, text_reply("ok"))

    from_settings(reader=registry.assistant()).propose(
        make_ctx(goal="book R7 the day after tomorrow 2-3pm for 3 with a projector")
    )

    system = system_message(endpoint.last)
    reading = json.loads(system.split("a reading, never a permission): ", 1)[1])
    assert reading["job"] == "book"
    assert (reading["attendees"], reading["rooms"], reading["equipment"]) == (
        3,
        ["R7"],
        ["projector"],
    )
    assert (reading["start"], reading["end"]) == (14 * 60, 15 * 60)


@pytest.mark.django_db
def test_what_is_missing_reaches_the_model(endpoint: FakeEndpoint, model_settings, rooms) -> None:
    endpoint.reply(200, text_reply("How many people?"))

    from_settings(reader=registry.assistant()).propose(make_ctx(goal="book a room tomorrow 2-3pm"))

    system = system_message(endpoint.last)
    assert '"missing": ["attendees"]' in system


def test_without_a_reader_no_reading_is_sent(endpoint: FakeEndpoint, model_settings) -> None:
    endpoint.reply(200, text_reply("ok"))

    from_settings().propose(make_ctx())

    assert "reading of the request" not in system_message(endpoint.last)


# --- schemas a constrained decoder can enforce ----------------------------------------------


def _patterns(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        found = [schema["pattern"]] if isinstance(schema.get("pattern"), str) else []
        return found + [p for value in schema.values() for p in _patterns(value)]
    if isinstance(schema, list):
        return [p for value in schema for p in _patterns(value)]
    return []


def test_tool_schemas_use_ascii_digit_classes() -> None:
    """A grammar-constrained decoder (llama.cpp's json-schema-to-grammar) enforces [0-9]; it
    does not know \\d. And \\d matched any Unicode digit (an Arabic-Indic seven after R)."""
    patterns = [
        p
        for spec in registry.all_tools()
        for p in _patterns(exports.openai_function(spec)["function"]["parameters"])
    ]

    assert patterns, "the booking tools have patterned fields"
    assert not [p for p in patterns if "\\d" in p]


def test_room_and_booking_codes_take_only_ascii_digits() -> None:
    from pydantic import ValidationError

    from bookings.tools.schemas import BookingRef, FindAvailableRoomsInput

    assert BookingRef.model_validate({"booking_id": "B204"}).booking_id == "B204"
    with pytest.raises(ValidationError, match="pattern"):
        BookingRef.model_validate({"booking_id": "B\u0662\u0660\u0664"})
    window = {"start_at": "2026-09-28T14:00:00+08:00", "end_at": "2026-09-28T15:00:00+08:00"}
    with pytest.raises(ValidationError, match="pattern"):
        FindAvailableRoomsInput.model_validate_json(
            json.dumps(window | {"attendees": 2, "room_id": "R\u0667"})
        )
