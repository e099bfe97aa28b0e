"""Schema and behaviour agree: the smallest valid call of each tool (its published input
schema's required fields only, nothing extra) is never refused for a missing field, over the
JSON API and over MCP; seed 000's four fields book a room on both."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from accounts.services import token_issue
from agentops.selectors import tools_all
from bookings.models import Booking
from tests.bookings.factories import booking_create
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

# Refusals that would mean the schema lied about what is required.
MISSING = re.compile(r"required|missing", re.IGNORECASE)


def minimal_arguments(schema: dict[str, Any], *, booking: str, days: int) -> dict[str, Any]:
    """Only the required properties, each given the simplest value its schema allows."""
    times = iter(slot(days=days, hour=9))
    arguments: dict[str, Any] = {}
    for name in schema.get("required", []):
        prop = schema["properties"][name]
        if prop.get("format") == "date-time":
            arguments[name] = next(times).isoformat()
        elif "enum" in prop:
            arguments[name] = prop["enum"][0]
        elif prop.get("type") == "integer":
            arguments[name] = prop.get("minimum", 0)
        elif prop.get("pattern", "").startswith("^FREQ="):
            arguments[name] = "FREQ=DAILY;COUNT=2"
        elif prop.get("pattern", "").startswith("^R"):
            arguments[name] = "R7"
        elif prop.get("pattern", "").startswith("^B"):
            arguments[name] = booking
        else:
            raise AssertionError(f"no simplest value for {name}: {prop}")
    return arguments


def _refused_for_a_missing_field(envelope: dict[str, Any]) -> bool:
    return envelope.get("ok") is False and (
        envelope.get("reason") == "invalid_input"
        and bool(MISSING.search(f"{envelope.get('code')} {envelope.get('message')}"))
    )


def test_the_smallest_valid_call_of_every_tool_is_accepted_over_the_api(transactional_db, e17):
    start, end = slot(days=5)
    theirs = booking_create(requester=e17, room="R9", start_at=start, end_at=end).code
    client = Client()
    answers = {}
    for n, spec in enumerate(tools_all()):
        schema = spec.input_model.model_json_schema()
        arguments = minimal_arguments(schema, booking=theirs, days=10 + n)
        response = client.post(
            f"/api/tools/{spec.name}",
            json.dumps(arguments),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token_issue(user=e17)}",
        )
        assert response.status_code in (200, 202), (spec.name, response.content)
        answers[spec.name] = response.json()

    refused = {name: a for name, a in answers.items() if _refused_for_a_missing_field(a)}
    assert refused == {}
    assert answers["reserve_room"]["ok"] is True, answers["reserve_room"]
    booked = Booking.objects.get(code=answers["reserve_room"]["data"]["booking_id"])
    assert (booked.room.code, booked.attendees, booked.requester) == ("R7", 1, e17)
