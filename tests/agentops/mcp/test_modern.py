"""/mcp in the 2026-07-28 era, against the real ASGI server (uvicorn, config.asgi) on the test
database: no handshake and no session; ``server/discover``; every call governed on its own; a
HIGH-risk call answers ``input_required`` with a sealed, single-use ``requestState``, or a task
for a client that declared the tasks extension; ``tools/list`` carries ``ttlMs``; a 401 names
the protected-resource metadata. Requests are written on the wire here, as the spec shows them,
so that what a client of another SDK sends is what is tested; the official client (mode
"auto") is checked to land in this era too."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import socket
import threading
import uuid
from typing import Any

import httpx2 as httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from accounts.models import AuditAction, AuditEntry
from accounts.services import token_issue
from agentops.models import Action, AgentRun, McpHandle
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from bookings.models import Booking, Room
from tests.agentops.mcp.conftest import mcp_client, run_async
from tests.conftest import slot
from tests.workers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
START, END = slot(days=3, hour=14)


@pytest.fixture(autouse=True)
def _db_calls_beside_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def reserve(room: str = "R16", *, days: int = 3) -> dict[str, Any]:
    start, end = slot(days=days, hour=14)
    return {
        "room_id": room,
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": 3,
        "expected_version": Room.objects.get(code=room).schedule_version,
    }


class Wire:
    """A 2026-07-28 client written out by hand: every request self-contained (version, client
    info and capabilities in ``_meta``; the routing headers), one JSON answer each."""

    def __init__(self, url: str, token: str | None, *, tasks: bool = False) -> None:
        self.url, self.token, self.tasks, self.ids = url, token, tasks, 0

    def post(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        self.ids += 1
        capabilities: dict[str, Any] = {"extensions": {TASKS: {}}} if self.tasks else {}
        meta = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "wire-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        params = dict(params or {})
        if method == "tools/call":
            headers["Mcp-Name"] = params["name"]
        if method.startswith("tasks/"):
            headers["Mcp-Name"] = params["taskId"]
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        body["params"]["_meta"] = meta
        return httpx.post(self.url, json=body, headers=headers, timeout=30)

    def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.post(method, params)
        assert response.status_code == 200, response.text
        assert "mcp-session-id" not in response.headers
        return response.json()["result"]

    def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.post(method, params)
        answer = response.json()
        assert "error" in answer, answer
        return answer["error"]

    def call(self, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return self.result("tools/call", {"name": name, "arguments": arguments, **extra})


def test_discover_then_tools_list_without_a_handshake_with_ttl_and_per_role(mcp_server, e17):
    from tests.accounts.factories import user_create

    wire = Wire(mcp_server, token_issue(user=e17))
    discovered = wire.result("server/discover")
    assert discovered["supportedVersions"] == [VERSION]
    assert "tools" in discovered["capabilities"]
    assert TASKS in discovered["capabilities"]["extensions"]

    listed = wire.result("tools/list")
    names = {t["name"] for t in listed["tools"]}
    assert {"reserve_room", "find_available_rooms", "get_action_status"} <= names
    assert listed["ttlMs"] == 60_000 and listed["cacheScope"] == "private"
    guest = Wire(mcp_server, token_issue(user=user_create("guest", roles=[])))
    assert [t["name"] for t in guest.result("tools/list")["tools"]] == ["get_action_status"]


def test_the_official_client_in_auto_mode_speaks_2026_07_28(worker, mcp_server, e17):
    async def session():
        async with mcp_client(mcp_server, token_issue(user=e17), mode="auto") as client:
            first = await client.call_tool(
                "find_available_rooms",
                {"start_at": START.isoformat(), "end_at": END.isoformat(), "attendees": 3},
            )
            second = await client.call_tool("get_booking", {"booking_id": "B999"})
            return client.protocol_version, first, second

    version, first, second = run_async(session)
    assert version == VERSION
    assert first.structured_content["signal"] == "green"
    assert second.structured_content["reason"] == "not_found"
    # No session: each call was governed on its own, as a run of its own.
    runs = AgentRun.objects.order_by("created_at")
    assert [r.kind for r in runs] == ["direct", "direct"]
    assert all(r.channel_session == "" for r in runs)


def test_a_high_risk_call_answers_input_required_and_its_retry_runs_it_once_after_approval(
    worker, mcp_server, e17, approver
):
    wire = Wire(mcp_server, token_issue(user=e17))
    arguments = reserve()
    waiting = wire.call("reserve_room", arguments)
    assert waiting["resultType"] == "input_required"
    state = waiting["requestState"]
    action = Action.objects.get()
    assert action.status == "waiting_approval" and Booking.objects.count() == 0
    assert action_id_not_readable(state, str(action.pk))  # sealed, not just signed
    assert waiting["_meta"]["io.rooms/pending"]["action_id"] == str(action.pk)

    # Retried before anyone decided: still waiting, under a new state; nothing ran.
    again = wire.call("reserve_room", arguments, requestState=state)
    assert again["resultType"] == "input_required" and again["requestState"] != state
    assert Action.objects.count() == 1 and Booking.objects.count() == 0
    # The first state was used: sending it again is refused, and runs nothing.
    replayed = wire.error(
        "tools/call", {"name": "reserve_room", "arguments": arguments, "requestState": state}
    )
    assert replayed["code"] == -32602 and "requestState" in replayed["message"]

    request = ApprovalRequest.objects.get(action_ref=str(action.pk))
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    wait_until(lambda: Action.objects.get().status == "succeeded", message="approved call")

    done = wire.call("reserve_room", arguments, requestState=again["requestState"])
    assert done["resultType"] == "complete" and done["isError"] is False
    booking = Booking.objects.get()
    assert done["structuredContent"]["data"]["booking_id"] == booking.code
    assert booking.room.code == "R16" and booking.requester == e17
    assert Action.objects.count() == 1  # the retries proposed nothing new
    assert McpHandle.objects.filter(used_at__isnull=True).count() == 0


def action_id_not_readable(state: str, action_id: str) -> bool:
    raw = base64.urlsafe_b64decode(state.split(".", 1)[1] + "==")
    return action_id.encode() not in raw and action_id not in state


def test_a_tampered_other_principals_other_calls_or_expired_state_is_refused(
    worker, mcp_server, e17, e23
):
    owner = Wire(mcp_server, token_issue(user=e17))
    arguments = reserve()
    state = owner.call("reserve_room", arguments)["requestState"]

    def refused(wire: Wire, args: dict[str, Any], sent: str) -> None:
        error = wire.error(
            "tools/call", {"name": "reserve_room", "arguments": args, "requestState": sent}
        )
        assert error["code"] == -32602, error

    flipped = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
    refused(owner, arguments, flipped)  # tampered
    refused(Wire(mcp_server, token_issue(user=e23)), arguments, state)  # another principal
    refused(owner, arguments | {"attendees": 4}, state)  # another call
    refused(owner, arguments, "v1.not-a-state")  # not one of ours
    # None of these used the state up; past its expiry even its owner is refused.
    assert McpHandle.objects.get().used_at is None
    McpHandle.objects.update(expires_at=McpHandle.objects.get().created_at)
    refused(owner, arguments, state)
    assert Action.objects.count() == 1 and Booking.objects.count() == 0
    assert AgentRun.objects.filter(subject=e23).count() == 0


def test_a_client_with_the_tasks_extension_gets_a_task_it_polls_and_cancels(
    worker, mcp_server, e17, e23
):
    wire = Wire(mcp_server, token_issue(user=e17), tasks=True)
    created = wire.call("reserve_room", reserve())
    assert created["resultType"] == "task" and created["status"] == "working"
    task_id = created["taskId"]
    assert len(task_id) >= 32 and created["pollIntervalMs"] > 0 and created["ttlMs"] > 0

    polled = wire.result("tasks/get", {"taskId": task_id})
    assert polled["status"] == "working" and polled["resultType"] == "complete"
    assert "approver" in polled["statusMessage"]
    # Another subject cannot read or cancel it: it looks unknown.
    other = Wire(mcp_server, token_issue(user=e23), tasks=True)
    assert other.error("tasks/get", {"taskId": task_id})["code"] == -32602
    assert other.error("tasks/cancel", {"taskId": task_id})["code"] == -32602
    assert Action.objects.get().status == "waiting_approval"

    assert wire.result("tasks/cancel", {"taskId": task_id}) == {
        "resultType": "complete",
        "_meta": wire.result("tasks/get", {"taskId": task_id})["_meta"],
    }
    # Eventually consistent, as the extension allows: the worker ends what waited.
    wait_until(lambda: Action.objects.get().status == "cancelled", message="cancelled call")
    final = wire.result("tasks/get", {"taskId": task_id})
    assert final["status"] == "cancelled"
    action = Action.objects.get()
    assert Booking.objects.count() == 0
    assert ApprovalRequest.objects.get(action_ref=str(action.pk)).status == "withdrawn"
    entry = AuditEntry.objects.get(action=AuditAction.APPROVAL_WITHDRAWN)
    assert entry.actor == e17 and entry.run_id == action.run_id
    assert wire.error("tasks/get", {"taskId": str(uuid.uuid4())})["code"] == -32602
    # Without the extension in the request's own capabilities, tasks/* are refused as such.
    undeclared = Wire(mcp_server, wire.token).error("tasks/get", {"taskId": task_id})
    assert undeclared["code"] == -32021
    assert TASKS in undeclared["data"]["requiredCapabilities"]["extensions"]


def test_a_task_completes_with_the_call_result_once_approved(worker, mcp_server, e17, approver):
    wire = Wire(mcp_server, token_issue(user=e17), tasks=True)
    task_id = wire.call("reserve_room", reserve())["taskId"]
    request = ApprovalRequest.objects.get()
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    wait_until(lambda: Action.objects.get().status == "succeeded", message="approved call")

    done = wire.result("tasks/get", {"taskId": task_id})
    assert done["status"] == "completed"
    assert done["result"]["isError"] is False
    assert done["result"]["structuredContent"]["data"]["booking_id"] == Booking.objects.get().code


def test_a_rejected_call_answers_its_refusal_on_retry(worker, mcp_server, e17, approver):
    wire = Wire(mcp_server, token_issue(user=e17))
    arguments = reserve()
    state = wire.call("reserve_room", arguments)["requestState"]
    request = ApprovalRequest.objects.get()
    approval_decide(request_id=request.pk, approver=approver, approve=False, reason="Too big")
    wait_until(lambda: Action.objects.get().status == "rejected", message="rejected call")

    refused = wire.call("reserve_room", arguments, requestState=state)
    assert refused["isError"] is True
    assert refused["structuredContent"]["code"] == "approval_rejected"
    assert "Too big" in refused["structuredContent"]["message"]
    assert Booking.objects.count() == 0


def test_without_a_token_the_401_names_the_protected_resource_metadata(mcp_server):
    response = Wire(mcp_server, None).post("tools/list")
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    origin = mcp_server.removesuffix("/mcp")
    expected = f'resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp"'
    assert challenge.startswith("Bearer ") and expected in challenge

    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        document = httpx.get(origin + path).json()
        assert document["resource"] == mcp_server
        assert document["bearer_methods_supported"] == ["header"]
    forged = httpx.get(
        origin + "/.well-known/oauth-protected-resource", headers={"Host": "evil.example"}
    )
    assert "evil.example" not in forged.text


def test_bad_input_in_the_new_era_is_a_clear_error_and_writes_nothing(mcp_server, e17):
    wire = Wire(mcp_server, token_issue(user=e17))
    cases = [
        ("tools/call", {"name": "reserve_room", "arguments": {"room_id": "R7"}}),
        ("tools/call", {"name": "no_such_tool", "arguments": {}}),
        ("tasks/get", {"taskId": "x" * 500}),
        ("tasks/cancel", {"taskId": ""}),
        ("tools/call", {"name": "reserve_room", "arguments": reserve(), "requestState": 7}),
    ]
    for method, params in cases:
        response = wire.post(method, params)
        assert response.status_code < 500, (method, params, response.text)
        answer = response.json()
        assert "error" in answer or answer["result"].get("isError") is True, answer
    raw = httpx.post(
        mcp_server,
        content=b"{not json",
        headers={
            "Authorization": f"Bearer {wire.token}",
            "MCP-Protocol-Version": VERSION,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        },
    )
    assert raw.status_code == 400 and json.loads(raw.text)["error"]["code"] == -32700
    assert Booking.objects.count() == 0 and McpHandle.objects.count() == 0


class RoundRobin:
    """A TCP proxy in front of several web processes: each connection goes to the next one."""

    def __init__(self, ports: list[int]) -> None:
        self.ports, self.served = ports, [0] * len(ports)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._next = itertools.count()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            index = next(self._next) % len(self.ports)
            self.served[index] += 1
            upstream = socket.create_connection(("127.0.0.1", self.ports[index]))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def two_web_processes(transactional_db, tmp_path):
    """Two uvicorn processes of config.asgi on the test database, behind a round-robin proxy:
    the URL of /mcp through the proxy, and the proxy."""
    from django.conf import settings
    from django.db import connection

    from tests.agentops.mcp.conftest import database_url, uvicorn_start

    env = {
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    started = [
        uvicorn_start("config.asgi:application", tmp_path=tmp_path, name=f"web{i}", env=env)
        for i in (1, 2)
    ]
    proxy = RoundRobin([port for _, port in started])
    try:
        yield f"http://127.0.0.1:{proxy.port}/mcp", proxy
    finally:
        proxy.close()
        for proc, _ in started:
            proc.terminate()
            proc.wait(timeout=10)
        connection.close()


def test_two_web_processes_behind_round_robin_answer_any_request_of_one_client(
    worker, two_web_processes, e17, approver
):
    url, proxy = two_web_processes
    wire = Wire(url, token_issue(user=e17))
    tasks = Wire(url, wire.token, tasks=True)
    assert wire.result("server/discover")["supportedVersions"] == [VERSION]  # web 1
    assert "reserve_room" in {t["name"] for t in wire.result("tools/list")["tools"]}  # web 2
    arguments = reserve()
    state = wire.call("reserve_room", arguments)["requestState"]  # web 1 seals it
    still = wire.call("reserve_room", arguments, requestState=state)  # web 2 reads it
    assert still["resultType"] == "input_required"

    def approve_all() -> None:
        for request in ApprovalRequest.objects.filter(status="pending"):
            decided = approval_decide(
                request_id=request.pk, approver=approver, approve=True, reason="ok"
            )
            assert decided.ok

    approve_all()
    wait_until(lambda: Action.objects.filter(status="succeeded").count() == 1, message="call")
    done = wire.call("reserve_room", arguments, requestState=still["requestState"])  # web 1
    assert done["isError"] is False

    task_id = tasks.call("reserve_room", reserve(days=4))["taskId"]  # web 2 creates the task
    approve_all()
    wait_until(lambda: Action.objects.filter(status="succeeded").count() == 2, message="task")
    polled = [tasks.result("tasks/get", {"taskId": task_id}) for _ in range(2)]  # web 1, web 2
    assert [p["status"] for p in polled] == ["completed", "completed"]
    assert Booking.objects.count() == 2 and Action.objects.count() == 2
    assert min(proxy.served) >= 3  # both processes answered this one client


@pytest.fixture
def token(e17) -> str:
    return token_issue(user=e17)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
methods = st.sampled_from(
    [
        "tools/call",
        "tools/list",
        "server/discover",
        "tasks/get",
        "tasks/cancel",
        "tasks/update",
        "initialize",
        "ping",
        "resources/list",
        "nope",
    ]
)


@hyp_settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    method=methods,
    params=st.dictionaries(
        st.sampled_from(["name", "arguments", "requestState", "taskId", "_meta", "inputResponses"]),
        json_values,
        max_size=4,
    ),
    version=st.sampled_from([VERSION, "2025-11-25", "1999-01-01", ""]),
)
def test_whatever_a_client_sends_in_either_era_is_never_a_5xx(
    mcp_server, token, method, params, version
):
    """One token for every example (the fixture runs once per test, not per example)."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Mcp-Method": method,
    }
    if version:
        headers["MCP-Protocol-Version"] = version
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(mcp_server, json=body, headers=headers, timeout=30)
    assert response.status_code < 500, (body, version, response.text)
    assert "Traceback" not in response.text
    assert Booking.objects.count() == 0
