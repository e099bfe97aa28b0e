"""The MCP server at /mcp: streamable HTTP (official ``mcp`` SDK, low-level server), protocol
revision 2025-11-25 (the handshake era; the SDK also accepts the older handshake revisions).

- Authentication: the same bearer tokens as the JSON API. The token decides the subject;
  nothing in a request's arguments can. A session is bound to the credential that opened it.
- tools/list: the tools the subject's roles may see, as ``agentops.contract.exports.mcp_tool`` derives
  them (schemas, annotations from the metadata, the six-part description), plus
  ``get_action_status``.
- tools/call: through the one recorder (``tool_call_governed``, channel "mcp"): gate, idempotency,
  approvals and trace as any run; each MCP session is one run (kind mcp). Refusals and tool
  failures are results with ``isError: true`` and the red/yellow envelope as
  ``structuredContent``; an unknown tool or malformed params are JSON-RPC errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from agentops import selectors, services

log = logging.getLogger(__name__)

PROTOCOL_VERSION = "2025-11-25"
USER_KEY = "agentops.mcp.user_id"  # set on the ASGI scope by the authenticating endpoint
# A client may name its retry of the same intent: the same key answers the first call's
# outcome instead of running it again.
IDEMPOTENCY_META_KEY = "agentops/idempotency-key"
INSTRUCTIONS = (
    "Meeting-room tools of a governed runtime. Every call is checked (schema, your role, "
    "budgets, policy); high-risk calls wait for a human approver and answer code "
    "approval_pending with an action_id: poll get_action_status with it. Results are "
    "envelopes: signal green (ok), red (permanent: do not retry unchanged), yellow "
    "(transient: retry later)."
)


async def _db(fn: Callable[..., Any], **kwargs: Any) -> Any:
    """Run database work on a pool thread (calls of different sessions run side by side) and
    give the connection back as a request would."""

    def run() -> Any:
        try:
            return fn(**kwargs)
        finally:
            close_old_connections()

    return await sync_to_async(run, thread_sensitive=False)()


def _caller(ctx: ServerRequestContext[Any, Any]) -> tuple[int, str | None]:
    request = ctx.request
    if request is None or USER_KEY not in request.scope:
        raise MCPError(types.INVALID_REQUEST, "Not authenticated.")
    return request.scope[USER_KEY], request.headers.get(MCP_SESSION_ID_HEADER)


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    user_id, _ = _caller(ctx)
    tools = await _db(selectors.mcp_tools, user_id=user_id)
    return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])


def _idempotency_key(params: types.CallToolRequestParams) -> str | None:
    meta = params.meta or {}
    if not isinstance(meta, dict):  # a model in some SDK versions, a TypedDict in others
        meta = meta.model_dump(by_alias=True)
    key = meta.get(IDEMPOTENCY_META_KEY)
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= 100:
        raise MCPError(
            types.INVALID_PARAMS, f"_meta {IDEMPOTENCY_META_KEY} must be 1-100 characters."
        )
    return key


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    user_id, session_id = _caller(ctx)
    visible = await _db(selectors.mcp_tool_names, user_id=user_id)
    if params.name not in visible:  # unknown, or not for this subject's roles: not listed
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name[:64]}")
    envelope = await _db(
        services.mcp_call,
        user_id=user_id,
        session_id=session_id,
        name=params.name,
        arguments=dict(params.arguments or {}),
        idempotency_key=_idempotency_key(params),
    )
    pending = envelope.get("code") == "approval_pending"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(envelope, default=str))],
        structured_content=envelope,
        is_error=not envelope.get("ok") and not pending,
    )


async def set_logging_level(
    ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    """Accepted: this server sends no log notifications, so every level is honoured."""
    return types.EmptyResult()


def build_server() -> Server:
    with warnings.catch_warnings():  # logging is deprecated only from revision 2026-07-28 on
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(
            "rooms-agentops",
            version="1.0",
            title="Rooms: governed meeting-room tools",
            instructions=INSTRUCTIONS,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_set_logging_level=set_logging_level,
        )


def _transport_security() -> TransportSecuritySettings:
    """DNS-rebinding protection from Django's ALLOWED_HOSTS (any port)."""
    hosts = [h for h in settings.ALLOWED_HOSTS if h]
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed = [f"{h}:*" for h in hosts] + hosts
    origins = [
        f"{scheme}://{h}{port}"
        for h in hosts
        for scheme in ("http", "https")
        for port in ("", ":*")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed, allowed_origins=origins
    )


async def _respond(
    send: Any, status: int, body: dict[str, Any], headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    raw = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


class McpEndpoint:
    """ASGI endpoint for /mcp: authenticates, pins the handshake-era protocol, then hands the
    request to the SDK's session manager (started on first use, so any ASGI server works)."""

    def __init__(self) -> None:
        self.server = build_server()
        self.manager = StreamableHTTPSessionManager(
            app=self.server, security_settings=_transport_security()
        )
        self._ready: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def _run_manager(self) -> None:
        async with self.manager.run():
            if self._ready is not None:
                self._ready.set()
            await asyncio.Event().wait()  # until shutdown cancels it

    async def _started(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run_manager())
        await self._ready.wait()

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self._started()
        auth = _header(scope, b"authorization") or ""
        raw = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        user = await _db(selectors.mcp_user, raw_token=raw)
        if user is None:
            await _respond(
                send,
                401,
                {"error": "invalid_token", "error_description": "A bearer token is required."},
                [(b"www-authenticate", b'Bearer error="invalid_token"')],
            )
            return
        version = _header(scope, b"mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await _respond(
                send,
                400,
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {
                        "code": types.UNSUPPORTED_PROTOCOL_VERSION,
                        "message": f"Unsupported protocol version; this server speaks {PROTOCOL_VERSION}.",
                        "data": {"supported": [PROTOCOL_VERSION], "requested": version[:32]},
                    },
                },
            )
            return
        principal = f"user:{user.pk}"
        scope = dict(scope)
        scope["user"] = AuthenticatedUser(
            AccessToken(token=principal, client_id=principal, scopes=[], subject=str(user.pk))
        )
        scope[USER_KEY] = user.pk
        await self.manager.handle_request(scope, receive, send)
        session_id = _header(scope, MCP_SESSION_ID_HEADER.lower().encode())
        if scope["method"] == "DELETE" and session_id:
            await _db(services.mcp_session_end, user_id=user.pk, session_id=session_id)


def mcp_mount(inner: Any, *, path: str = "/mcp") -> Any:
    """Wrap the project's ASGI application: HTTP requests to ``path`` go to the MCP endpoint,
    the lifespan stops it, everything else goes to ``inner``."""
    endpoint = McpEndpoint()

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") == path:
            await endpoint(scope, receive, send)
        elif scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await endpoint.shutdown()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        else:
            await inner(scope, receive, send)

    application.endpoint = endpoint  # type: ignore[attr-defined]
    # What tests/test_authorization_matrix.py reads to find this route and the app behind it.
    application.mount_path = path  # type: ignore[attr-defined]
    application.inner = inner  # type: ignore[attr-defined]
    return application
