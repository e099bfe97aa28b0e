"""The conformance profile keeps its fixtures out of the product: without MCP_CONFORMANCE_FIXTURES
(the default) /mcp serves none of the suite's tools, prompts, resources or completions, in either
era; with it, the fixtures sit beside the product's tools, which still go through the gate."""

from __future__ import annotations

import pytest
from django.conf import settings
from mcp.shared.exceptions import MCPError

from accounts.services import token_issue
from agentops.mcp.conformance import TOOLS
from agentops.models import Action
from tests.agentops.mcp.conftest import database_url, mcp_client, run_async, uvicorn_start
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
