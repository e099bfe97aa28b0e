"""Over MCP too: the smallest valid call of every tool (required fields only) is never refused
for a missing field, and seed 000's four fields book a room."""

from __future__ import annotations

import pytest

from accounts.services import token_issue
from agentops.selectors import tools_all
from bookings.models import Booking
from tests.agentops.api.test_minimal_calls import _refused_for_a_missing_field, minimal_arguments
from tests.agentops.mcp.conftest import mcp_client, run_async
from tests.bookings.factories import booking_create
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


@pytest.fixture(autouse=True)
def _db_calls_beside_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_the_smallest_valid_call_of_every_tool_is_accepted_over_mcp(mcp_server, e17):
    start, end = slot(days=5)
    mine = booking_create(requester=e17, room="R9", start_at=start, end_at=end).code
    calls = {
        spec.name: minimal_arguments(
            spec.input_model.model_json_schema(), booking=mine, days=10 + n
        )
        for n, spec in enumerate(tools_all())
    }

    async def session(token):
        async with mcp_client(mcp_server, token) as client:
            return {name: await client.call_tool(name, args) for name, args in calls.items()}

    answers = run_async(lambda: session(token_issue(user=e17)))

    envelopes = {name: a.structured_content for name, a in answers.items()}
    assert {n: e for n, e in envelopes.items() if _refused_for_a_missing_field(e)} == {}
    assert answers["reserve_room"].is_error is False, envelopes["reserve_room"]
    booked = Booking.objects.get(code=envelopes["reserve_room"]["data"]["booking_id"])
    assert (booked.room.code, booked.attendees, booked.requester) == ("R7", 1, e17)


def test_seed_000s_four_fields_book_over_mcp(mcp_server, e17):
    start, end = slot(days=4, hour=11)
    four = {
        "room_id": "R7",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "expected_version": 0,
    }

    async def call(token):
        async with mcp_client(mcp_server, token) as client:
            return await client.call_tool("reserve_room", four)

    answer = run_async(lambda: call(token_issue(user=e17)))

    assert answer.is_error is False, answer.structured_content
    booking = Booking.objects.get()
    assert answer.structured_content["data"]["booking_id"] == booking.code
    assert (booking.room.code, booking.attendees) == ("R7", 1)
