"""The inbox screen and its live channel: approvers only, a poke when requests open or settle,
e-mail to approvers, and a refused decision keeps the card with its reason."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from agentops.runtime.redis_client import get_redis
from agentops.runtime.trace import _watch_key
from approvals.live import INBOX_GROUP
from approvals.models import ApprovalRequest
from approvals.services import approval_request_open
from config.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1:8000")  # settings.WEBSOCKET_ALLOWED_ORIGINS


def headers(user):
    if user is None:
        return [ORIGIN]
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), ORIGIN]


def open_request(requester) -> ApprovalRequest:
    return approval_request_open(
        action_ref="a1",
        run_ref="r1",
        requester=requester,
        binding={"action": "a1"},
        intent={"tool": "reserve_room", "subject": "E17", "params": {"room_id": "R16"}},
        deadline=timezone.now() + timedelta(minutes=30),
    )


@pytest.mark.parametrize(("who", "code"), [("anonymous", 4401), ("employee", 4403)])
def test_only_approvers_may_listen(e17, who, code):
    who_headers = headers(None if who == "anonymous" else e17)

    async def attempt():
        comm = WebsocketCommunicator(application, "/ws/approvals/", headers=who_headers)
        connected, detail = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected, detail

    connected, detail = asyncio.run(attempt())
    assert (connected, detail) == (False, code)
    assert not get_redis().exists(_watch_key(INBOX_GROUP))  # a refused socket leaves no mark


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ({"bytes": b"\xff"}, 1003),
        ({"text": "<html>"}, 1007),
        ({"text": json.dumps(["x" * 5000])}, 1009),
    ],
    ids=["binary", "not-json", "oversized"],
)
def test_a_frame_that_is_not_small_json_closes_the_inbox_and_leaves_its_group(
    approver, frame, code
):
    group = "agentops:channels:group:approvals.inbox"  # channels_redis: prefix, group
    approver_headers = headers(approver)

    async def scenario():
        comm = WebsocketCommunicator(application, "/ws/approvals/", headers=approver_headers)
        connected, _ = await comm.connect(timeout=5)
        assert connected
        members = get_redis().zcard(group)
        listening = get_redis().scard(_watch_key(INBOX_GROUP))
        await comm.send_input({"type": "websocket.receive", **frame})
        closed = await comm.receive_output(timeout=5)
        await comm.wait(5)  # the consumer ended, raising nothing
        return members, listening, closed

    members, listening, closed = asyncio.run(scenario())
    assert (members, listening) == (1, 1)
    assert closed == {"type": "websocket.close", "code": code}
    assert get_redis().zcard(group) == 0
    assert get_redis().scard(_watch_key(INBOX_GROUP)) == 0  # pokes stop: nobody listens


def test_an_approver_is_poked_when_a_request_opens(e17, approver):
    approver_headers = headers(approver)

    async def listen():
        comm = WebsocketCommunicator(application, "/ws/approvals/", headers=approver_headers)
        connected, _ = await comm.connect(timeout=5)
        assert connected
        from channels.db import database_sync_to_async

        await database_sync_to_async(open_request)(e17)
        message = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return message

    assert asyncio.run(listen()) == {"changed": True}
    assert not get_redis().exists(_watch_key(INBOX_GROUP))


def test_approvers_get_an_email_and_the_requester_does_not(e17, approver, mailoutbox):
    approver.email = "a01@rooms.example"
    approver.save()
    e17.email = "e17@rooms.example"
    e17.save()
    open_request(e17)
    assert len(mailoutbox) == 1
    assert mailoutbox[0].to == ["a01@rooms.example"]
    assert "reserve_room" in mailoutbox[0].subject


def test_a_refused_htmx_decision_keeps_the_card_and_says_why(e17, approver):
    request = open_request(e17)
    client = Client()
    client.force_login(approver)
    response = client.post(
        f"/approvals/{request.pk}/decide/",
        {"decision": "approve", "reason": ""},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert f'id="request-{request.pk}"' in response.text
    assert "Give a reason" in response.text
    assert 'name="reason"' in response.text
    request.refresh_from_db()
    assert request.status == "pending"


def test_the_inbox_refreshes_its_list_as_a_fragment(e17, approver):
    open_request(e17)
    client = Client()
    client.force_login(approver)
    fragment = client.get("/approvals/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    assert "<html" not in fragment.text
    assert "1 request waiting" in fragment.text
    page = client.get("/approvals/")
    assert "<html" in page.text
    assert "/ws/approvals/" in page.text


def test_a_decision_made_in_place_asks_the_list_to_re_read(e17, approver):
    request = open_request(e17)
    client = Client()
    client.force_login(approver)
    response = client.post(
        f"/approvals/{request.pk}/decide/",
        {"decision": "reject", "reason": "not this week"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert response["HX-Trigger"] == "inbox-changed"
    assert "Rejected." in response.text
    request.refresh_from_db()
    assert request.status == "rejected"


def test_a_stale_request_is_offered_for_a_fresh_approval_to_approvers_only(e17, e23, approver):
    from approvals.models import ApprovalAudit, RequestStatus

    request = open_request(e17)
    ApprovalRequest.objects.filter(pk=request.pk).update(status=RequestStatus.STALE)
    client = Client()
    client.force_login(approver)
    page = client.get("/approvals/")
    assert f'data-stale="{request.pk}"' in page.text
    employee = Client()
    employee.force_login(e23)
    employee.post(f"/approvals/{request.pk}/refresh/")
    assert ApprovalAudit.objects.filter(event="refused", actor=e23).exists()
    assert not ApprovalAudit.objects.filter(event="refresh_requested").exists()
    assert client.post(f"/approvals/{request.pk}/refresh/").status_code == 302
    assert ApprovalAudit.objects.filter(event="refresh_requested", actor=approver).exists()
