"""The MCP server at /mcp: streamable HTTP (official ``mcp`` SDK 2.x, low-level server), in both
eras of the protocol, as the SDK routes them by the ``MCP-Protocol-Version`` header:

- **2026-07-28** (stateless): no handshake and no ``Mcp-Session-Id``; ``server/discover``; each
  request carries its version, client info and capabilities in ``_meta``. Every call is governed
  on its own (a run of kind direct per call) and nothing about the client is held in this
  process, so any web process answers any request. A HIGH-risk call answers ``input_required``
  with a sealed ``requestState`` (``agentops.runtime.mcp_waits``), or, for a client that declared
  the ``io.modelcontextprotocol/tasks`` extension, a task it polls with ``tasks/get`` and may
  end with ``tasks/cancel``. ``tools/list`` carries ``ttlMs`` (private: it is per role).
- **2025-11-25** and the older handshake revisions: ``initialize``, a session per client (each
  MCP session is one run, kind mcp), a HIGH-risk call answers ``approval_pending`` with an
  ``action_id`` to poll with ``get_action_status``.

In both: authentication is the same bearer tokens as the JSON API (a 401 names the protected-
resource metadata, RFC 9728: ``agentops.mcp.metadata``); the token decides the subject and
nothing in a request's arguments can. tools/list shows the tools the subject's roles may see, as
``agentops.contract.exports.mcp_tool`` derives them, plus ``get_action_status``. tools/call goes
through the one recorder (``tool_call_governed``, channel "mcp"): gate, idempotency, approvals and
trace as any run. Refusals and tool failures are results with ``isError: true`` and the red/yellow
envelope as ``structuredContent``; an unknown tool or malformed params are JSON-RPC errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
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
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentops import selectors, services
from agentops.mcp import metadata

log = logging.getLogger(__name__)

SERVER_NAME = "rooms-agentops"
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
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TOOLS_TTL_MS = (
    60_000  # how long a client may keep the tool list (it changes with roles and deploys)
)
STATE_HINT = "retry this call with the requestState to learn the approver's decision"


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
    """The subject (from the bearer token) and, in the handshake era, the session."""
    request = ctx.request
    if request is None or USER_KEY not in request.scope:
        raise MCPError(types.INVALID_REQUEST, "Not authenticated.")
    if _modern(ctx):
        return request.scope[USER_KEY], None
    return request.scope[USER_KEY], request.headers.get(MCP_SESSION_ID_HEADER)


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """What a requestState is bound to: the subject the bearer token authenticated."""
    request = ctx.request
    if request is None or USER_KEY not in request.scope:
        return None
    return f"user:{request.scope[USER_KEY]}"


def _declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's own capabilities (not an earlier one's) include the tasks
    extension: the only case in which an answer may be a task."""
    meta = (ctx.params or {}).get("_meta")
    capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


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


def _result(envelope: dict[str, Any]) -> types.CallToolResult:
    pending = envelope.get("code") == "approval_pending"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(envelope, default=str))],
        structured_content=envelope,
        is_error=not envelope.get("ok") and not pending,
    )


def _result_wire(envelope: dict[str, Any]) -> dict[str, Any]:
    return _result(envelope).model_dump(by_alias=True, mode="json", exclude_none=True)


async def _input_required(
    user_id: int, action_id: str, envelope: dict[str, Any] | None
) -> types.InputRequiredResult:
    """Still waiting: a fresh single-use state (the boundary seals it), and what waits, in
    ``_meta`` for a client that shows it."""
    state = await _db(services.mcp_state_mint, user_id=user_id, action_id=action_id)
    pending = (envelope or {}).get("pending") or {"action_id": action_id}
    return types.InputRequiredResult(
        request_state=state,
        _meta={"io.rooms/pending": pending | {"hint": STATE_HINT}},
    )


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
    user_id, session_id = _caller(ctx)
    visible = await _db(selectors.mcp_tool_names, user_id=user_id)
    if params.name not in visible:  # unknown, or not for this subject's roles: not listed
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name[:64]}")
    arguments = dict(params.arguments or {})
    if _modern(ctx) and params.request_state is not None:
        # The boundary verified the seal, the principal, the expiry and the call's digest.
        redeemed = await _db(
            services.mcp_state_redeem,
            user_id=user_id,
            state=params.request_state,
            name=params.name,
            arguments=arguments,
        )
        if redeemed is None:  # used before, or its wait is gone
            raise MCPError(
                types.INVALID_PARAMS,
                "Invalid or expired requestState",
                {"reason": "invalid_request_state"},
            )
        action_id, answer = redeemed
        if answer is None:
            return await _input_required(user_id, action_id, None)
        return _result(answer)
    envelope = await _db(
        services.mcp_call,
        user_id=user_id,
        session_id=session_id,
        name=params.name,
        arguments=arguments,
        idempotency_key=_idempotency_key(params),
    )
    if _modern(ctx) and envelope.get("code") == "approval_pending":
        action_id = envelope["pending"]["action_id"]
        if _declares_tasks(ctx):
            task = await _db(services.mcp_task_create, user_id=user_id, action_id=action_id)
            return {"resultType": "task", **_task_wire(task)}
        return await _input_required(user_id, action_id, envelope)
    return _result(envelope)


# --- tasks (io.modelcontextprotocol/tasks, 2026-07-28) ------------------------------------------


class TaskParams(types.RequestParams):
    task_id: str


class TaskUpdateParams(TaskParams):
    input_responses: dict[str, Any] | None = None


def _task_wire(task: dict[str, Any]) -> dict[str, Any]:
    task = dict(task)
    envelope = task.pop("envelope", None)
    if envelope is not None:
        task["result"] = _result_wire(envelope)
    return task


async def _task_request(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> int:
    if not _modern(ctx):
        raise MCPError(types.METHOD_NOT_FOUND, "Method not found", ctx.method)
    user_id, _ = _caller(ctx)
    if not _declares_tasks(ctx):  # the extension's rule: a task is only for a client that says so
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )
    named = ctx.request.headers.get("mcp-name") if ctx.request is not None else None
    if named is not None and named != params.task_id:
        raise MCPError(types.HEADER_MISMATCH, "Mcp-Name does not match the taskId")
    return user_id


def _no_task() -> MCPError:
    return MCPError(types.INVALID_PARAMS, "Unknown task.", {"reason": "task_not_found"})


async def tasks_get(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    user_id = await _task_request(ctx, params)
    task = await _db(selectors.mcp_task_get, user_id=user_id, task_id=params.task_id)
    if task is None:
        raise _no_task()
    return _task_wire(task)


async def tasks_cancel(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    user_id = await _task_request(ctx, params)
    if not await _db(services.mcp_task_cancel, user_id=user_id, task_id=params.task_id):
        raise _no_task()
    return {}


async def tasks_update(
    ctx: ServerRequestContext[Any, Any], params: TaskUpdateParams
) -> dict[str, Any]:
    """Acknowledged: these tasks ask the client for nothing (an approver decides), so every
    input response is for a key that is not outstanding and is ignored, as the extension says."""
    user_id = await _task_request(ctx, params)
    if await _db(selectors.mcp_task_get, user_id=user_id, task_id=params.task_id) is None:
        raise _no_task()
    return {}


async def set_logging_level(
    ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    """Accepted: this server sends no log notifications, so every level is honoured."""
    return types.EmptyResult()


def request_state_security() -> RequestStateSecurity:
    """Sealing keys shared by every web process (derived from SECRET_KEY, so a state minted by
    one is read by another), with the subject as the principal."""
    key = hmac.new(settings.SECRET_KEY.encode(), b"mcp/request-state", hashlib.sha256).digest()
    return RequestStateSecurity(
        keys=[key], ttl=services.MCP_STATE_TTL.total_seconds(), bind_principal=_principal
    )


def build_server() -> Server:
    with warnings.catch_warnings():  # logging is deprecated only from revision 2026-07-28 on
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = Server(
            SERVER_NAME,
            version="1.0",
            title="Rooms: governed meeting-room tools",
            instructions=INSTRUCTIONS,
            cache_hints={"tools/list": CacheHint(ttl_ms=TOOLS_TTL_MS, scope="private")},
            on_list_tools=list_tools,
            on_set_logging_level=set_logging_level,
        )
    # Registered as a plain handler: besides the two core shapes it may answer a task.
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    server.middleware.append(
        RequestStateBoundary(request_state_security(), default_audience=SERVER_NAME)
    )
    server.extensions[TASKS_EXTENSION] = {}
    server.add_request_handler("tasks/get", TaskParams, tasks_get)
    server.add_request_handler("tasks/cancel", TaskParams, tasks_cancel)
    server.add_request_handler("tasks/update", TaskUpdateParams, tasks_update)
    if settings.MCP_CONFORMANCE_FIXTURES:  # the conformance profile only (.ci/mcp-conformance)
        from agentops.mcp import conformance

        conformance.install(server)
    return server


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
    """ASGI endpoint for /mcp: authenticates, then hands the request to the SDK's session
    manager (started on first use, so any ASGI server works), which routes it to its era."""

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
                [(b"www-authenticate", metadata.www_authenticate(scope).encode())],
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
