"""The conformance profile keeps its fixtures out of the product: without MCP_CONFORMANCE_FIXTURES
(the default) /mcp serves none of the suite's tools, prompts, resources or completions, in either
era; with it, the fixtures sit beside the product's tools, which still go through the gate."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import settings
from mcp.shared.exceptions import MCPError

from accounts.services import token_issue
from agentops.mcp.conformance import TOOLS
from agentops.mcp.conformance.tasks import MOVES, FixtureTask, Status, move
from agentops.models import Action
from tests.agentops.mcp.conftest import database_url, mcp_client, run_async, uvicorn_start
from tests.agentops.mcp.test_modern import Wire, reserve
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

FIXTURE_TOOLS = set(TOOLS)


@pytest.fixture(autouse=True)
def _default_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers started here inherit this environment: the default, whatever the shell has."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    monkeypatch.delenv("MCP_CONFORMANCE_FIXTURES", raising=False)


@pytest.fixture
def conformance_server(transactional_db, tmp_path):
    """The same server as ``mcp_server``, under the conformance profile."""
    proc, port = uvicorn_start(
        "config.asgi:application",
        tmp_path=tmp_path,
        name="uvicorn-conformance",
        env={
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "MCP_CONFORMANCE_FIXTURES": "true",
        },
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # 2025-11-25, then 2026-07-28
def test_by_default_mcp_serves_none_of_the_suites_fixtures(mcp_server, e17, mode):
    async def probe(token):
        async with mcp_client(mcp_server, token, mode=mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            refusals = []
            for call in (
                client.list_prompts,
                client.list_resources,
                lambda: client.call_tool("test_simple_text", {}),
            ):
                with pytest.raises(MCPError) as refused:
                    await call()
                refusals.append(refused.value.error.code)
            return client.protocol_version, names, refusals

    version, names, refusals = run_async(lambda: probe(token_issue(user=e17)))

    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert "find_available_rooms" in names
    assert names & FIXTURE_TOOLS == set()
    assert not any(name.startswith("test_") for name in names)
    # prompts/list and resources/list: method not found; the fixture tool: unknown.
    assert refusals == [-32601, -32601, -32602]
    assert Action.objects.count() == 0


def test_the_profile_serves_the_fixtures_beside_the_products_governed_tools(
    conformance_server, e17
):
    start, end = slot(days=5, hour=14)
    search = {"start_at": start.isoformat(), "end_at": end.isoformat(), "attendees": 3}

    async def session(token):
        async with mcp_client(conformance_server, token) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            fixture = await client.call_tool("test_simple_text", {})
            product = await client.call_tool("find_available_rooms", search)
            return names, prompts, fixture, product

    names, prompts, fixture, product = run_async(lambda: session(token_issue(user=e17)))

    assert {"test_simple_text", "find_available_rooms", "reserve_room"} <= names
    assert "test_simple_prompt" in prompts
    assert fixture.content[0].text == "This is a simple text response for testing."
    assert product.structured_content["signal"] == "green"
    # Only the product's call went through the recorder: the fixture left no action.
    assert list(Action.objects.values_list("tool", flat=True)) == ["find_available_rooms"]


def test_fixture_tasks_ask_resume_and_cancel_beside_the_products_own_tasks(
    conformance_server, e17, e23
):
    wire = Wire(conformance_server, token_issue(user=e17), tasks=True)
    product_task = wire.call("reserve_room", reserve())["taskId"]
    created = wire.call("confirm_delete", {"filename": "a.txt"})
    assert created["resultType"] == "task" and "inputRequests" not in created
    task_id = created["taskId"]
    assert len(task_id) >= 32 and task_id != product_task

    asked = _polled(wire, task_id, "input_required")
    # Another subject's view: unknown, as for the product's tasks.
    other = Wire(conformance_server, token_issue(user=e23), tasks=True)
    assert other.error("tasks/get", {"taskId": task_id})["code"] == -32602
    assert other.error("tasks/cancel", {"taskId": task_id})["code"] == -32602
    (key,) = asked["inputRequests"]
    assert asked["inputRequests"][key]["method"] == "elicitation/create"
    # A key that is not outstanding is acknowledged and ignored; the task still waits.
    assert wire.result("tasks/update", {"taskId": task_id, "inputResponses": {"other": {}}}) == {
        "resultType": "complete",
        "_meta": asked["_meta"],
    }
    assert wire.result("tasks/get", {"taskId": task_id})["inputRequests"].keys() == {key}
    answer = {"action": "accept", "content": {"confirm": True}}
    wire.result("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
    done = _polled(wire, task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Deleted a.txt."

    running = wire.call("slow_compute", {"seconds": 60})["taskId"]
    assert wire.result("tasks/cancel", {"taskId": running})["resultType"] == "complete"
    assert wire.result("tasks/get", {"taskId": running})["status"] == "cancelled"

    # The product's task is still the product's, and so is every refusal.
    assert "approver" in wire.result("tasks/get", {"taskId": product_task})["statusMessage"]
    assert wire.error("tasks/get", {"taskId": "x" * 40})["code"] == -32602
    undeclared = Wire(conformance_server, wire.token)
    assert undeclared.error("tasks/get", {"taskId": task_id})["code"] == -32021
    assert undeclared.error("tools/call", {"name": "failing_job", "arguments": {}})["code"] == (
        -32021
    )
    assert list(Action.objects.values_list("tool", flat=True)) == ["reserve_room"]


def test_a_fixture_task_moves_only_as_its_table_allows():
    terminal = {status for status, moves in MOVES.items() if not moves}
    assert terminal == {Status.COMPLETED, Status.FAILED, Status.CANCELLED}
    assert set(MOVES) == set(Status)
    task = FixtureTask(task_id="t")
    with pytest.raises(RuntimeError, match="cannot move from working to working"):
        move(task, Status.WORKING)
    move(task, Status.CANCELLED)
    with pytest.raises(RuntimeError, match="cannot move from cancelled to completed"):
        move(task, Status.COMPLETED)


def _polled(wire: Wire, task_id: str, status: str) -> dict[str, Any]:
    """Poll until the task shows ``status``; fail the test if it does not within 5 seconds."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        task = wire.result("tasks/get", {"taskId": task_id})
        if task["status"] == status:
            return task
        time.sleep(0.05)
    pytest.fail(f"task {task_id} did not reach {status}: {task}")
