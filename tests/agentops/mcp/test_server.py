"""The MCP server at /mcp, driven by the official MCP client against the real ASGI server
(uvicorn, config.asgi) on the test database."""

from __future__ import annotations

import httpx2 as httpx
import pytest
from mcp.shared.exceptions import MCPError

from accounts.services import token_issue
from agentops.models import Action, AgentRun, TraceEvent
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from bookings.models import Booking, Room
from tests.accounts.factories import user_create
from tests.agentops.mcp.conftest import mcp_client, run_async
from tests.conftest import slot
from tests.workers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=3, hour=14)


@pytest.fixture(autouse=True)
def _db_calls_beside_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client runs in an event loop; the test's own (short) database reads sit between
    its awaits, on the test's thread."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def reserve(room: str = "R7", **extra) -> dict:
    return {
        "room_id": room,
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": 3,
        "expected_version": Room.objects.get(code=room).schedule_version,
    } | extra


def test_tools_list_shows_the_subjects_tools_with_schemas_annotations_and_six_parts(
    mcp_server, e17
):
    nobody = user_create("guest", roles=[])

    async def listing(token):
        async with mcp_client(mcp_server, token) as client:
            assert client.protocol_version == "2025-11-25"
            return {t.name: t for t in (await client.list_tools()).tools}

    tools = run_async(lambda: listing(token_issue(user=e17)))
    assert {"find_available_rooms", "reserve_room", "cancel_booking", "get_action_status"} <= set(
        tools
    )
    reserve_room = tools["reserve_room"]
    assert reserve_room.annotations.read_only_hint is False
    assert reserve_room.annotations.destructive_hint is True
    assert reserve_room.annotations.idempotent_hint is True
    assert tools["find_available_rooms"].annotations.read_only_hint is True
    assert reserve_room.input_schema["additionalProperties"] is False
    assert set(reserve_room.input_schema["required"]) == {
        "room_id",
        "start_at",
        "end_at",
        "expected_version",
    }
    assert "data" in reserve_room.output_schema["properties"]
    for part in ("[When to use]", "[Not the same as]", "[Parameters]", "[Example]"):
        assert part in reserve_room.description
    # A subject without the employees role sees none of the booking tools.
    assert set(run_async(lambda: listing(token_issue(user=nobody)))) == {"get_action_status"}


def test_calls_of_one_session_are_one_run_through_the_gate(worker, mcp_server, e17):
    async def session():
        async with mcp_client(mcp_server, token_issue(user=e17)) as client:
            found = await client.call_tool(
                "find_available_rooms",
                {"start_at": START.isoformat(), "end_at": END.isoformat(), "attendees": 3},
            )
            booked = await client.call_tool("reserve_room", reserve())
            return found, booked

    found, booked = run_async(session)

    assert found.is_error is False
    assert found.structured_content["signal"] == "green"
    assert "R7" in {r["room_id"] for r in found.structured_content["data"]["rooms"]}
    assert booked.is_error is False, booked.structured_content
    booking = Booking.objects.get()
    assert booked.structured_content["data"]["booking_id"] == booking.code
    run = AgentRun.objects.get()
    assert run.kind == "mcp" and run.subject == e17 and run.channel_session
    assert run.budgets["max_tool_calls"] > 1
    assert [a.tool for a in run.actions.order_by("turn")] == [
        "find_available_rooms",
        "reserve_room",
    ]
    write = run.actions.get(tool="reserve_room")
    assert write.idempotency_key == f"{run.pk}:2:0"  # the host's key, not the client's
    kinds = list(TraceEvent.objects.filter(run=run).values_list("kind", flat=True))
    assert kinds.count("gate") == 2 and kinds.count("execution_finished") == 2
    # The client closed its session (DELETE): with nothing waiting, the run ends.
    wait_until(lambda: AgentRun.objects.get().status == "succeeded", message="session end")
    assert AgentRun.objects.get().outcome == "session_ended"


def test_a_validation_error_is_a_tool_result_with_is_error_and_writes_nothing(
    worker, mcp_server, e17
):
    version = Room.objects.get(code="R7").schedule_version

    async def call():
        async with mcp_client(mcp_server, token_issue(user=e17)) as client:
            naive = reserve() | {"start_at": START.replace(tzinfo=None).isoformat()}
            smuggled = reserve() | {"requester_id": "E23"}
            return [await client.call_tool("reserve_room", a) for a in (naive, smuggled)]

    for result in run_async(call):
        assert result.is_error is True
        envelope = result.structured_content
        assert envelope["ok"] is False and envelope["signal"] == "red"
        assert envelope["reason"] == "invalid_input" and envelope["hint"]
    assert Booking.objects.count() == 0
    assert Room.objects.get(code="R7").schedule_version == version
    assert set(Action.objects.values_list("status", flat=True)) == {"rejected"}


def test_an_unknown_tool_and_a_malformed_request_are_protocol_errors(mcp_server, e17):
    nobody = user_create("guest", roles=[])

    async def call(token, name):
        async with mcp_client(mcp_server, token) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool(name, {})
            return raised.value

    unknown = run_async(lambda: call(token_issue(user=e17), "delete_all_bookings"))
    assert unknown.code == -32602 and "Unknown tool" in unknown.message
    # A tool the subject's roles do not show is unknown to that subject too.
    hidden = run_async(lambda: call(token_issue(user=nobody), "reserve_room"))
    assert hidden.code == -32602
    assert AgentRun.objects.count() == 0

    headers = {
        "Authorization": f"Bearer {token_issue(user=e17)}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    malformed = httpx.post(mcp_server, content=b'{"jsonrpc": "2.0", "id": 1,', headers=headers)
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == -32700  # parse error


def test_without_a_valid_token_nothing_is_served(mcp_server, e17):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        response = httpx.post(mcp_server, json=body, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_high_risk_call_waits_for_approval_then_reports_its_receipt(
    worker, mcp_server, e17, approver
):
    token = token_issue(user=e17)

    async def propose():
        async with mcp_client(mcp_server, token) as client:
            pending = await client.call_tool("reserve_room", reserve("R16"))
            status = await client.call_tool(
                "get_action_status",
                {"action_id": pending.structured_content["pending"]["action_id"]},
            )
            return pending, status

    pending, status = run_async(propose)
    assert pending.is_error is False
    envelope = pending.structured_content
    assert envelope["code"] == "approval_pending" and "get_action_status" in envelope["hint"]
    action_id = envelope["pending"]["action_id"]
    assert status.structured_content["data"]["status"] == "waiting_approval"
    assert status.structured_content["data"]["decision"]["status"] == "pending"
    assert Booking.objects.count() == 0
    # The session ended while its call waits: its run stays open for the decision.
    assert AgentRun.objects.get().status == "running"

    request = ApprovalRequest.objects.get(action_ref=action_id)
    assert approval_decide(
        request_id=request.pk, approver=approver, approve=True, reason="Board meeting"
    ).ok
    wait_until(lambda: Action.objects.get(pk=action_id).status == "succeeded", message="run")

    async def later():  # a new session of the same subject
        async with mcp_client(mcp_server, token) as client:
            return await client.call_tool("get_action_status", {"action_id": action_id})

    data = run_async(later).structured_content["data"]
    booking = Booking.objects.get()
    assert booking.room.code == "R16" and booking.requester == e17
    assert data["status"] == "succeeded"
    assert data["decision"] == {"status": "approved", "approver": "a01", "reason": "Board meeting"}
    assert data["receipt"]["booking_id"] == booking.code


def test_another_subjects_token_cannot_see_or_touch_someone_elses_session_or_action(
    worker, mcp_server, e17, e23
):
    def hijack(session_id: str) -> httpx.Response:
        """e17's open session id, presented with e23's token."""
        headers = {
            "Authorization": f"Bearer {token_issue(user=e23)}",
            "Mcp-Session-Id": session_id,
            "Mcp-Protocol-Version": "2025-11-25",
            "Accept": "application/json, text/event-stream",
        }
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
        body["params"] = {"name": "cancel_booking", "arguments": {"booking_id": "B1"}}
        return httpx.post(mcp_server, json=body, headers=headers)

    async def propose():
        async with mcp_client(mcp_server, token_issue(user=e17)) as client:
            pending = await client.call_tool("reserve_room", reserve("R16"))
            hijacked = hijack(AgentRun.objects.get().channel_session)
            return pending.structured_content["pending"]["action_id"], hijacked

    action_id, hijacked = run_async(propose)
    assert hijacked.status_code == 404  # as if the session did not exist
    run = AgentRun.objects.get()
    assert run.subject == e17 and run.actions.count() == 1

    async def snoop():
        async with mcp_client(mcp_server, token_issue(user=e23)) as client:
            return await client.call_tool("get_action_status", {"action_id": action_id})

    snooped = run_async(snoop)
    assert snooped.is_error is True
    assert snooped.structured_content["code"] == "action_not_found"
    assert action_id not in str(snooped.content)
    assert AgentRun.objects.filter(subject=e23).count() == 0  # the status tool runs nothing
