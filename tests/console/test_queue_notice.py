"""The queue explains itself and is heard: what an unclear write is and what each decision does,
the last resolved items, an empty state saying when anything appears; operators get an e-mail
and a live poke when something enters it, and every page's counts re-read without a reload."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from agentops.contract import ReceiptLookup, ReceiptStatus
from agentops.models import ActionStatus
from agentops.runtime import registry
from agentops.runtime.queue_notice import QUEUE_GROUP, queue_poke
from agentops.runtime.redis_client import get_redis
from agentops.runtime.trace import _watch_key
from approvals.live import INBOX_GROUP, inbox_poke
from config.asgi import application
from tests.accounts.factories import EMPLOYEES, user_create
from tests.console.test_reconcile_queue import OPERATORS, _waiting_for_human
from tests.workers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@pytest.fixture
def operator(db):
    return user_create("o01", roles=[EMPLOYEES, OPERATORS])


@pytest.fixture
def unclear(monkeypatch):
    """reserve_room's lookup answers "unknown" while ``unclear["on"]`` (as in the queue's tests)."""
    spec = registry.get("reserve_room")
    state = {"on": True}

    def lookup(key: str) -> ReceiptLookup:
        if state["on"]:
            return ReceiptLookup(ReceiptStatus.UNKNOWN, detail="test: unclear")
        return spec.lookup_receipt(key)

    monkeypatch.setitem(
        registry._TOOLS, "reserve_room", dataclasses.replace(spec, lookup_receipt=lookup)
    )
    return state


def _headers(user) -> list:
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), ORIGIN]


def test_an_empty_queue_says_what_lands_here_and_when(client, operator):
    client.force_login(operator)
    html = client.get(reverse("operators:queue")).content.decode()
    assert "An unclear write is a booking change whose answer was lost" in html
    assert "Accept the receipt" in html and "Retry with the same key" in html
    assert "Something appears when a write" in html and "stays unclear" in html
    assert "Nothing has been resolved yet." in html


def test_entering_the_queue_mails_the_operators_and_shows_in_the_last_resolved(
    worker, e17, operator, unclear, mailoutbox
):
    operator.email = "o01@example.com"
    operator.save(update_fields=["email"])
    action = _waiting_for_human(e17, "timeout")
    assert action.status == ActionStatus.NEEDS_HUMAN
    # The mail goes after the commit that queued the write (a hook of the worker's thread): the
    # status can be read a moment before it is sent.
    wait_until(
        lambda: any("o01@example.com" in m.to for m in mailoutbox), message="the operators' mail"
    )
    mails = [m for m in mailoutbox if "o01@example.com" in m.to]
    assert len(mails) == 1
    assert mails[0].subject == "A write needs an operator's decision"
    assert action.idempotency_key in mails[0].body

    unclear["on"] = False
    client = Client()
    client.force_login(operator)
    client.post(reverse("operators:decide", args=[action.pk]), {"decision": "abandon"})
    html = client.get(reverse("operators:queue")).content.decode()
    resolved = html.split('id="resolved"', 1)[1]
    assert "Abandoned an unclear write" in resolved and action.idempotency_key in resolved


@pytest.mark.django_db(transaction=True)
def test_the_navigation_hears_the_queue_and_the_inbox_change(operator, approver):
    async def listen(headers, poke) -> dict:
        comm = WebsocketCommunicator(application, "/ws/nav/", headers=headers)
        connected, _ = await comm.connect(timeout=5)
        assert connected
        await sync_to_async(poke)()
        message = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return message

    assert asyncio.run(listen(_headers(operator), queue_poke)) == {"changed": "queue"}
    assert asyncio.run(listen(_headers(approver), inbox_poke)) == {"changed": "approvals"}
    # Each socket marked its groups listened to while open (pokes go only to those) and took
    # its mark away when it closed.
    assert not get_redis().exists(_watch_key(QUEUE_GROUP))
    assert not get_redis().exists(_watch_key(INBOX_GROUP))


@pytest.mark.django_db(transaction=True)
def test_an_employee_is_not_let_onto_the_navigation_socket(e17):
    headers = _headers(e17)

    async def attempt():
        comm = WebsocketCommunicator(application, "/ws/nav/", headers=headers)
        connected, code = await comm.connect(timeout=5)
        return connected, code

    assert asyncio.run(attempt()) == (False, 4403)


def test_the_counts_come_back_out_of_band(client, operator, approver):
    client.force_login(operator)
    html = client.get(reverse("operators:nav-counts")).content.decode()
    assert 'id="operators-count"' in html and 'hx-swap-oob="true"' in html
    assert 'id="approvals-count"' not in html
    client.force_login(approver)
    html = client.get(reverse("operators:nav-counts")).content.decode()
    assert 'id="approvals-count"' in html and 'id="operators-count"' not in html
