"""Text people type is kept clean on every channel (accounts.typed): NFC, no zero-width
characters; a direction control refused in a meeting title and an approver's reason (nothing
written), taken out of a request to the assistant."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.services import token_issue
from accounts.typed import TypedField, UncleanText, typed_text
from agentops.models import Action, AgentRun
from agentops.runtime.runs import run_start
from approvals.models import ApprovalRecord, ApprovalRequest
from approvals.services import approval_decide, approval_request_open
from bookings.errors import BookingError
from bookings.models import Booking, BookingChange, Room
from bookings.services import booking_reserve
from tests.agentops.mcp.conftest import mcp_client, run_async
from tests.conftest import reserve_room_arguments, slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "Budget \u202eweiver" reads "Budget reviewer"
SPOOFED = f"Budget {RLO}weiver"
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}
HTMX = {"HTTP_HX_REQUEST": "true"}


def written() -> tuple:
    """Every row a refused write could leave, and every room's schedule version."""
    return (
        list(Booking.objects.order_by("pk").values_list("pk", "room_id", "during", "title")),
        BookingChange.objects.count(),
        ApprovalRequest.objects.count(),
        ApprovalRecord.objects.count(),
        dict(Room.objects.values_list("code", "schedule_version")),
    )


def reserve_arguments(title: str, days: int = 2) -> dict:
    return reserve_room_arguments("R7", *slot(days=days), 3) | {"title": title}


# --- the rule --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "char",
    [*"\u202a\u202b\u202c\u202d\u202e", *"\u2066\u2067\u2068\u2069", *"\u200e\u200f\u061c"],
)
def test_a_direction_control_is_refused_in_a_title_and_a_reason_and_dropped_from_a_request(
    char,
):
    for field in (TypedField.TITLE, TypedField.REASON):
        with pytest.raises(UncleanText, match=f"U\\+{ord(char):04X}"):
            typed_text(f"Retro{char} notes", field)
    assert typed_text(f"Retro{char} notes", TypedField.REQUEST) == "Retro notes"


def test_zero_width_characters_go_and_every_field_is_nfc():
    for field in TypedField:
        typed = typed_text("Cafe\u0301\u200b \u200c\u200dsync\u2060\ufeff", field)
        assert typed == "Caf\u00e9 sync"


# --- the screens -----------------------------------------------------------------------------


def book_form(title: str) -> dict:
    start, end = slot(days=1)
    return {
        "room": "R7",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": 3,
        "idempotency_key": str(uuid.uuid4()),
        "version": Room.objects.get(code="R7").schedule_version,
        "title": title,
    }


def test_the_booking_screen_refuses_a_reversed_title_in_the_readers_words(e17):
    client = Client()
    client.force_login(e17)
    before = written()

    english = client.post(reverse("bookings:book"), book_form(SPOOFED), **HTMX)
    chinese = client.post(reverse("bookings:book"), book_form(SPOOFED), **HTMX, **ZH)

    assert "changes the direction of the text (U+202E)" in english.text
    assert "改变文字方向的不可见字符（U+202E）" in chinese.text
    assert written() == before


def test_the_booking_screen_keeps_a_title_nfc_without_zero_width_characters(e17):
    client = Client()
    client.force_login(e17)

    client.post(reverse("bookings:book"), book_form("\u200bCafe\u0301 sync\ufeff"), **HTMX)

    assert Booking.objects.get().title == "Caf\u00e9 sync"


def test_the_change_screen_refuses_a_reversed_title(e17):
    booking = booking_reserve(
        user=e17,
        room_code="R7",
        start_at=slot()[0],
        end_at=slot()[1],
        attendees=3,
        idempotency_key="k1",
    ).booking
    client = Client()
    client.force_login(e17)
    start, end = slot()
    before = written()

    response = client.post(
        reverse("bookings:change", args=[booking.code]),
        {
            "room": "R7",
            "date": start.date().isoformat(),
            "start": start.strftime("%H:%M"),
            "end": end.strftime("%H:%M"),
            "attendees": 3,
            "title": SPOOFED,
            "idempotency_key": str(uuid.uuid4()),
        },
        **HTMX,
    )

    assert "(U+202E)" in response.text
    assert written() == before


# --- the services, the JSON API, MCP, the assistant -------------------------------------------


def test_the_booking_service_refuses_a_reversed_title(e17):
    before = written()
    start, end = slot()
    with pytest.raises(BookingError) as info:
        booking_reserve(
            user=e17,
            room_code="R7",
            start_at=start,
            end_at=end,
            attendees=3,
            idempotency_key="k1",
            title=SPOOFED,
        )
    assert (info.value.reason, info.value.code) == ("invalid_input", "direction_control")
    assert written() == before


@pytest.mark.parametrize("tool", ["reserve_room", "change_booking"])
def test_the_api_refuses_a_reversed_title_as_invalid_input(e17, tool):
    start, end = slot(days=5)
    mine = booking_reserve(
        user=e17, room_code="R9", start_at=start, end_at=end, attendees=3, idempotency_key="k"
    ).booking
    arguments = (
        reserve_arguments(SPOOFED)
        if tool == "reserve_room"
        else {"booking_id": mine.code, "title": SPOOFED, "expected_version": 1}
    )
    before = written()

    response = Client().post(
        reverse("agentops:api-tool-call", args=[tool]),
        data=json.dumps(arguments),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token_issue(user=e17)}",
    )

    envelope = response.json()
    assert (envelope["ok"], envelope["reason"]) == (False, "invalid_input")
    assert "title" in envelope["message"] and "U+202E" in envelope["message"]
    assert written() == before


@pytest.mark.integration
def test_mcp_refuses_a_reversed_title_as_a_tool_error(mcp_server, e17, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    arguments = reserve_arguments(SPOOFED)
    token = token_issue(user=e17)
    before = written()

    async def call():
        async with mcp_client(mcp_server, token) as client:
            return await client.call_tool("reserve_room", arguments)

    answer = run_async(call)

    assert answer.is_error is True
    assert answer.structured_content["reason"] == "invalid_input"
    assert "U+202E" in answer.structured_content["message"]
    assert written() == before


@pytest.mark.integration
def test_a_models_reversed_title_is_refused_at_the_gate_and_a_request_is_kept_clean(worker, e17):
    start, end = slot(days=2)
    before = written()
    request = (
        f"book R7 on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people "
        f"\u200bfor the {RLO}weiver"
    )

    run = run_start(
        user=e17,
        request_text=request,
        model="scripted",
        script=[{"proposals": [{"tool": "reserve_room", "arguments": reserve_arguments(SPOOFED)}]}],
    )
    run = wait_for_run(run.pk)

    action = Action.objects.get(run=run, tool="reserve_room")
    assert (action.status, action.result["reason"]) == ("rejected", "invalid_input")
    assert "U+202E" in action.result["message"]
    assert written() == before
    goal = AgentRun.objects.get(pk=run.pk).goal
    assert goal.endswith("for 3 people for the weiver")  # what is kept and shown back


# --- an approver's reason ----------------------------------------------------------------------


def test_a_reversed_reason_is_refused_and_nothing_is_decided(e17, approver):
    request = approval_request_open(
        action_ref="a1",
        run_ref="r1",
        requester=e17,
        binding={"action": "a1"},
        intent={"tool": "reserve_room", "subject": "E17", "params": {"room_id": "R16"}},
        deadline=timezone.now() + timedelta(minutes=30),
    )
    before = written()

    refused = approval_decide(
        request_id=request.pk, approver=approver, approve=False, reason=f"too {RLO}evisnepxe"
    )
    client = Client()
    client.force_login(approver)
    screen = client.post(
        f"/approvals/{request.pk}/decide/",
        {"decision": "reject", "reason": f"too {RLO}evisnepxe"},
        **HTMX,
        **ZH,
    )

    assert (refused.ok, refused.code) == (False, "direction_control")
    assert "改变文字方向" in screen.text
    assert written() == before
    request.refresh_from_db()
    assert request.status == "pending"
    assert approval_decide(
        request_id=request.pk, approver=approver, approve=False, reason="too\u200b expensive"
    ).ok
    assert ApprovalRecord.objects.get().reason == "too expensive"
