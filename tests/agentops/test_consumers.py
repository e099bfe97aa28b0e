"""The live trace websocket: session-authenticated, the owner's runs only, catch-up from the
database, then live pushes through the real Redis channel layer."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentops.execution.recorder import call_direct
from agentops.models import Action, AgentRun
from agentops.runtime.runs import run_start
from config.asgi import application
from tests.agentops.conftest import release_faults, wait_until
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=7)
REQUEST = f"book a room on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"
ORIGIN = (b"origin", b"http://127.0.0.1:8000")  # settings.WEBSOCKET_ALLOWED_ORIGINS


def session_headers(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), ORIGIN]


async def connect(path: str, headers) -> tuple[WebsocketCommunicator, bool, object]:
    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, detail = await comm.connect(timeout=5)
    return comm, connected, detail


async def receive_until(comm: WebsocketCommunicator, kind: str, timeout: float = 20) -> list[dict]:
    events = []
    while True:
        event = json.loads(await comm.receive_from(timeout=timeout))
        events.append(event)
        if event["kind"] == kind:
            return events


def finished_run(user) -> AgentRun:
    call_direct(user=user, name="list_my_bookings", arguments={})
    return AgentRun.objects.get(subject=user)


@pytest.mark.django_db(transaction=True)
def test_no_session_is_refused(e17):
    run = finished_run(e17)

    async def scenario():
        comm, connected, code = await connect(f"/ws/runs/{run.pk}/", [ORIGIN])
        await comm.disconnect()
        return connected, code

    assert asyncio.run(scenario()) == (False, 4401)


@pytest.mark.django_db(transaction=True)
def test_someone_elses_run_is_refused_as_absent(e17, e23):
    run = finished_run(e23)
    headers = session_headers(e17)

    async def scenario():
        comm, connected, code = await connect(f"/ws/runs/{run.pk}/", headers)
        await comm.disconnect()
        return connected, code

    assert asyncio.run(scenario()) == (False, 4404)


@pytest.mark.django_db(transaction=True)
def test_a_foreign_origin_is_refused(e17):
    run = finished_run(e17)
    headers = [h for h in session_headers(e17) if h[0] != b"origin"] + [
        (b"origin", b"https://evil.example")
    ]

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        await comm.disconnect()
        return connected

    assert asyncio.run(scenario()) is False


@pytest.mark.django_db(transaction=True)
def test_connecting_sends_what_the_page_missed_from_the_database(e17):
    run = finished_run(e17)
    headers = session_headers(e17)

    async def scenario(after: int):
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/?after={after}", headers)
        assert connected
        events = await receive_until(comm, "run_finished")
        assert await comm.receive_nothing(timeout=0.3)
        await comm.disconnect()
        return [(e["seq"], e["kind"]) for e in events]

    assert asyncio.run(scenario(0)) == [
        (1, "gate"),
        (2, "execution_started"),
        (3, "execution_finished"),
        (4, "run_finished"),
    ]
    assert asyncio.run(scenario(2)) == [(3, "execution_finished"), (4, "run_finished")]


def test_a_running_run_streams_live_in_order_without_repeats(worker, e17):
    run = run_start(
        user=e17, request_text=REQUEST, faults=[{"tool": "find_available_rooms", "kind": "pause"}]
    )
    wait_until(
        lambda: Action.objects.filter(run=run, status="running").exists(), message="search running"
    )
    headers = session_headers(e17)

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        assert connected
        backlog = [json.loads(await comm.receive_from(timeout=5)) for _ in range(4)]
        release_faults(run.pk)  # from here on, events arrive as the worker commits them
        live = await receive_until(comm, "run_finished")
        await comm.disconnect()
        return backlog + live

    events = asyncio.run(scenario())
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert seqs[-1] == run.events.count()
    assert events[-1]["payload"]["reply"] == run.reply
