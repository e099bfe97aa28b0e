"""A small third-party MCP server for the gateway tests: a notification sender *without* its
own dedupe (seed 001: the mail server that sent one customer 50 notices). Every delivery is
appended to the JSON-lines file named by NOTIFY_OUTBOX, so a test counts what really arrived.

    uvicorn tests.agentops.mcp.notify_server:app          (streamable HTTP at /mcp, both eras)
    uvicorn tests.agentops.mcp.notify_server:legacy_app   (as a server from before 2026-07-28)
    python -m tests.agentops.mcp.notify_server --stdio    (stdio)

Each delivery records the protocol revision it came in (``_protocol_version``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

OUTBOX = Path(os.environ.get("NOTIFY_OUTBOX", "/tmp/notify-outbox.jsonl"))  # noqa: S108

TOOLS = [
    types.Tool(
        name="send_notification",
        description="Send a notification e-mail. Sends every time it is called.",
        input_schema={
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "subject": {"type": "string"},
                "body": {"type": "string"},
                "audience": {"type": "string", "enum": ["one", "all"], "default": "one"},
                "idempotency_key": {"type": "string", "description": "Logged, not checked."},
            },
            "required": ["to", "subject", "body"],
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="list_outbox",
        description="What was sent so far.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    ),
    types.Tool(
        name="purge_outbox",
        description="Delete every sent notification.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    ),
]


def _outbox() -> list[dict[str, Any]]:
    if not OUTBOX.exists():
        return []
    return [json.loads(line) for line in OUTBOX.read_text().splitlines() if line]


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = dict(params.arguments or {})
    if params.name == "list_outbox":
        return _text(json.dumps(_outbox()))
    if params.name == "purge_outbox":
        OUTBOX.write_text("")
        return _text("purged")
    if params.name != "send_notification":
        raise MCPError(types.METHOD_NOT_FOUND, f"no tool {params.name}")
    to = str(args.get("to", ""))
    if not args.get("subject"):
        raise MCPError(types.INVALID_PARAMS, "subject must not be empty")
    if to.endswith("@bounce.test"):
        return _text(f"Mailbox {to} not found", error=True)
    if to.endswith("@down.test"):
        raise MCPError(types.INTERNAL_ERROR, "SMTP relay temporarily unavailable")
    if to.endswith("@slow.test"):  # sends, but only after the caller's timeout
        await anyio.sleep(4)
    if to.endswith("@busy.test"):
        return _text("Rate limit exceeded: too many messages", error=True)
    with OUTBOX.open("a") as out:
        out.write(json.dumps(args | {"_protocol_version": ctx.protocol_version}) + "\n")
    return _text(f"sent to {to} (#{len(_outbox())})")


server = Server("notify", version="0.1", on_list_tools=list_tools, on_call_tool=call_tool)
app = server.streamable_http_app(stateless_http=True, json_response=True)


async def legacy_app(scope: Any, receive: Any, send: Any) -> None:
    """What a server of the handshake era answers a 2026-07-28 request: 400, unsupported
    protocol version (the 2025-11-25 transport's rule); everything else as ``app``."""
    headers = dict(scope.get("headers") or [])
    version = headers.get(b"mcp-protocol-version", b"").decode()
    if scope["type"] == "http" and version and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "Bad Request: Unsupported protocol version"},
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return
    await app(scope, receive, send)


if __name__ == "__main__" and "--stdio" in sys.argv:
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
