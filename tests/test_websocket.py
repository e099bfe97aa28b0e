"""Every socket refuses cleanly through one base (config.websocket.OneWaySocket): each kind of
client mistake, sent to each socket of config.asgi, gets its close code, the socket leaves its
groups and their listening marks, and nothing is logged with a traceback."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from agentops.runtime.redis_client import get_redis
from agentops.runtime.trace import _watch_key, run_group
from approvals.live import INBOX_GROUP
from bookings.live import day_group
from bookings.notices import user_group
from config.asgi import application
from console.live import _nav_groups
from tests.agentops.factories import run_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ORIGIN = (b"origin", b"http://127.0.0.1:8000")  # settings.WEBSOCKET_ALLOWED_ORIGINS
SOCKETS = ["schedule", "bookings", "nav", "approvals", "runs"]
MANY_FIELDS = "&".join(f"f{n}={n}" for n in range(20))


def session_headers(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), ORIGIN]


@pytest.fixture
def socket(request, e17, approver) -> dict[str, Any]:
    """One socket of ours as someone allowed to open it: its path (with the query its page
    sends), whose session, and the groups it joins."""
    name = request.param
    today = timezone.localdate().isoformat()
    if name == "schedule":
        return {"path": "/ws/schedule/", "query": f"day={today}", "user": e17,
                "groups": [day_group(timezone.localdate())]}  # fmt: skip
    if name == "bookings":
        return {"path": "/ws/bookings/", "query": "", "user": e17, "groups": [user_group(e17.pk)]}
    if name == "nav":
        return {"path": "/ws/nav/", "query": "", "user": approver, "groups": _nav_groups(approver)}
    if name == "approvals":
        return {"path": "/ws/approvals/", "query": "", "user": approver, "groups": [INBOX_GROUP]}
    run = run_create(e17)  # its backlog (one event) comes once it has joined its group
    return {"path": f"/ws/runs/{run.pk}/", "query": "after=0&lang=en", "user": e17,
            "groups": [run_group(str(run.pk))], "backlog": 1}  # fmt: skip


def marks(groups: list[str]) -> list[tuple[int, int]]:
    """Per group: sockets in it (the channel layer's) and sockets marked listening to it."""
    layer = get_channel_layer()
    redis = get_redis()
    return [(redis.zcard(layer._group_key(g)), redis.scard(_watch_key(g))) for g in groups]


def communicator(socket: dict[str, Any], query: bytes | str | None = None) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(application, socket["path"], headers=socket["headers"])
    given = socket["query"] if query is None else query
    # The communicator takes a str path; a server hands the query string over as raw bytes.
    comm.scope["query_string"] = given if isinstance(given, bytes) else given.encode()
    return comm


async def opened(socket: dict[str, Any]) -> WebsocketCommunicator:
    """The socket, connected and in its groups (past the backlog it sends once joined)."""
    comm = communicator(socket)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    for _ in range(socket.get("backlog", 0)):
        await comm.receive_output(timeout=5)
    return comm


async def close_code(comm: WebsocketCommunicator) -> int:
    """The code the socket closed with, past whatever it sent first (a run's backlog)."""
    while True:
        output = await comm.receive_output(timeout=5)
        if output["type"] == "websocket.close":
            return output["code"]


@pytest.fixture
def no_tracebacks(caplog):
    caplog.set_level(logging.INFO)
    yield
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


@pytest.mark.usefixtures("no_tracebacks")
@pytest.mark.parametrize("socket", SOCKETS, indirect=True)
@pytest.mark.parametrize(
    ("query", "name"),
    [
        (b"day=%ff%fe", "percent-escaped bytes that are not UTF-8"),
        (b"day=\xff\xfe", "raw bytes that are not UTF-8"),
        (MANY_FIELDS, "twenty fields"),
        ("x=" + "a" * 2000, "a query string of 2 kB"),
    ],
    ids=["escaped-not-utf8", "raw-not-utf8", "many-fields", "too-long"],
)
def test_a_bad_query_string_is_refused_at_the_handshake_with_4400(socket, query, name):
    socket["headers"] = session_headers(socket["user"])
    before = marks(socket["groups"])

    async def attempt():
        comm = communicator(socket, query)
        connected, code = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected, code

    assert asyncio.run(attempt()) == (False, 4400), name
    assert marks(socket["groups"]) == before


@pytest.mark.usefixtures("no_tracebacks")
@pytest.mark.parametrize("socket", SOCKETS, indirect=True)
def test_five_fields_more_than_the_page_sends_are_no_server_error(socket):
    """The attack that found a 500 on /ws/schedule/: five fields or more."""
    socket["headers"] = session_headers(socket["user"])
    extra = "a=1&b=2&c=3&d=4"
    query = f"{socket['query']}&{extra}" if socket["query"] else extra

    async def attempt():
        comm = communicator(socket, query)
        connected, _ = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected

    assert asyncio.run(attempt()) is True


@pytest.mark.usefixtures("no_tracebacks")
@pytest.mark.parametrize("socket", SOCKETS, indirect=True)
@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ({"bytes": b"\x00\xff"}, 1003),
        ({"text": "<html>not json"}, 1007),
        ({"text": '{"a": ' * 100_000}, 1009),
        ({"text": '{"after": 1'}, 1007),
    ],
    ids=["binary", "not-json", "oversized", "cut-json"],
)
def test_a_frame_that_is_not_small_json_closes_the_socket_and_it_leaves_its_groups(
    socket, frame, code
):
    socket["headers"] = session_headers(socket["user"])
    before = marks(socket["groups"])

    async def scenario():
        comm = await opened(socket)
        joined = marks(socket["groups"])
        await comm.send_input({"type": "websocket.receive", **frame})
        closed = await close_code(comm)
        await comm.wait(5)  # the consumer ended, raising nothing
        return joined, closed

    joined, closed = asyncio.run(scenario())
    assert joined == [(m + 1, w + 1) for m, w in before]
    assert closed == code
    assert marks(socket["groups"]) == before  # cleanup ran: no group, no mark left


@pytest.mark.usefixtures("no_tracebacks")
@pytest.mark.parametrize("socket", SOCKETS, indirect=True)
def test_a_small_json_frame_is_ignored_and_a_client_leaving_cleans_up(socket):
    socket["headers"] = session_headers(socket["user"])
    before = marks(socket["groups"])

    async def scenario():
        comm = await opened(socket)
        joined = marks(socket["groups"])
        await comm.send_json_to({"hello": "server"})
        assert await comm.receive_nothing(timeout=0.2)
        await comm.disconnect()
        return joined

    joined = asyncio.run(scenario())
    assert joined == [(m + 1, w + 1) for m, w in before]
    assert marks(socket["groups"]) == before


@pytest.mark.usefixtures("no_tracebacks")
@pytest.mark.parametrize(
    "path",
    ["/ws/", "/ws/nope/", "/ws/runs/not-a-run/", "/ws/schedule/extra/", "/ws/bookings/%ff/"],
)
def test_a_path_no_socket_serves_is_closed_at_the_handshake(e17, path):
    headers = session_headers(e17)

    async def attempt():
        comm = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected, code

    assert asyncio.run(attempt()) == (False, 4404)
