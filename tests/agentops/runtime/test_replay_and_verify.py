"""Seed 002's replay and verification on every channel: a finished call's key answers from the
tool's current receipt, not from the runtime's cache alone, and a direct call's or an MCP
session's confirmed write is verified against the environment as it settles; the run's status
agrees with the answer."""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.test import Client

from accounts.services import token_issue
from agentops.contract import Verification
from agentops.models import AgentRun, EventKind, RunKind
from agentops.runtime import registry
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.mcp_sessions import mcp_call
from bookings.models import Booking, Room
from bookings.services import booking_cancel
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


def _reserve(room: str = "R7", hour: int = 10) -> dict:
    start, end = slot(days=3, hour=hour)
    return {
        "room_id": room,
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "expected_version": Room.objects.get(code=room).schedule_version,
    }


def _post(user, body: dict, key: str):
    return Client().post(
        "/api/tools/reserve_room",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token_issue(user=user)}",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def test_a_replay_answers_green_while_the_booking_holds(transactional_db, e17):
    body = _reserve()
    first = _post(e17, body, "k-1").json()
    again = _post(e17, body, "k-1").json()

    assert first["ok"] is again["ok"] is True
    assert again["data"]["booking_id"] == first["data"]["booking_id"]
    assert Booking.objects.count() == 1
    replay_run = AgentRun.objects.order_by("-created_at").first()
    assert replay_run.status == "succeeded"


def test_a_replay_after_the_booking_was_cancelled_says_so_and_its_run_fails(transactional_db, e17):
    body = _reserve()
    first = _post(e17, body, "k-2").json()
    booking_cancel(user=e17, booking_code=first["data"]["booking_id"])
    versions = dict(Room.objects.values_list("code", "schedule_version"))

    again = _post(e17, body, "k-2").json()

    assert again["ok"] is False
    assert (again["signal"], again["code"]) == ("red", "receipt_no_longer_holds")
    assert again["receipt"]["booking_id"] == first["data"]["booking_id"]
    assert "cancelled" in again["message"]
    replay_run = AgentRun.objects.order_by("-created_at").first()
    assert (replay_run.status, replay_run.outcome) == ("failed", "call_failed")
    # Nothing was booked again, and no schedule moved.
    assert Booking.objects.filter(status="confirmed").count() == 0
    assert dict(Room.objects.values_list("code", "schedule_version")) == versions


def test_a_direct_write_is_verified_as_it_settles(transactional_db, e17):
    answer = tool_call_governed(user=e17, name="reserve_room", arguments=_reserve())

    assert answer["ok"] is True
    run = AgentRun.objects.get(kind=RunKind.DIRECT)
    [verified] = run.events.filter(kind=EventKind.VERIFIED)
    assert verified.payload["holds"] is True
    assert (run.status, run.outcome) == ("succeeded", "call_succeeded")


@pytest.fixture
def reserve_that_never_holds():
    """reserve_room as it is, but its verify finds the receipt gone (the world changed under
    the write): registered for one test under its own name."""
    spec = dataclasses.replace(
        registry.get("reserve_room"),
        name="reserve_room_unheld",
        verify=lambda receipt, ctx: Verification(False, "the booking is gone"),
    )
    registry.register(spec)
    yield spec.name
    registry.unregister(spec.name)


@pytest.mark.parametrize("channel", ["direct", "mcp"])
def test_a_write_whose_receipt_does_not_hold_is_never_answered_green(
    transactional_db, e17, reserve_that_never_holds, channel
):
    if channel == "direct":
        answer = tool_call_governed(user=e17, name=reserve_that_never_holds, arguments=_reserve())
    else:
        answer = mcp_call(
            user_id=e17.pk,
            session_id="verify",
            name=reserve_that_never_holds,
            arguments=_reserve(),
            idempotency_key=None,
        )

    assert (answer["ok"], answer["code"]) == (False, "receipt_no_longer_holds")
    run = AgentRun.objects.get()
    [verified] = run.events.filter(kind=EventKind.VERIFIED)
    assert verified.payload == {"holds": False, "detail": "the booking is gone"}
    if channel == "direct":
        assert (run.status, run.outcome) == ("failed", "verification_failed")
    else:  # the session goes on; its call's record says what was found
        assert run.status == "running"
