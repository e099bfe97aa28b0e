"""The gateway to third-party MCP servers: their tools join the registry as ordinary tool specs,
so the gate, approvals, idempotency (the host's key, injected as the argument the patch names),
timeouts, output caps and traces apply to them as to our own tools.

"Don't trust other people's server code, only the boundary we define" (seed 001): what a tool
*is* (side effect, read-only, idempotent, latency, roles) comes from a local metadata patch,
never from the third party's description. A tool without a patch is HIGH (a human approves
each call) and not read-only. A multi-purpose tool is routed to a stricter policy by argument
rules in its patch (``routes``). The third party's answers are translated into the
red/yellow/green envelope with hints: JSON-RPC errors by code, ``isError`` results by their
text; their text is untrusted data, length-capped and quoted.

Configuration (settings.MCP_GATEWAY_SERVERS, JSON or ``@file``)::

    [{"name": "notify", "url": "http://127.0.0.1:9000/mcp",      # or "command": ["prog", "arg"]
      "roles": ["employees"],                                     # who sees unpatched tools
      "tools": {"send_notification": {
          "side_effect": "MEDIUM", "readonly": false, "idempotent": true,
          "latency_ms": 800, "roles": ["employees"], "max_output_bytes": 4096,
          "idempotency_argument": "idempotency_key",
          "routes": [{"when": {"audience": ["all"]}, "side_effect": "HIGH",
                      "reason": "a notification to everyone"}]}}}]
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import jsonschema
import mcp_types as types
from django.conf import settings
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, model_validator

from agentops import services
from agentops.contract import (
    CallContext,
    LostReceiptError,
    Reason,
    ReceiptLookup,
    ReceiptStatus,
    Risk,
    SideEffect,
    ToolDescription,
    ToolMeta,
    ToolSpec,
    Verification,
    failure,
    success,
)

if TYPE_CHECKING:
    from mcp import Client

log = logging.getLogger(__name__)

QUOTE_CHARS = 300  # how much of a third party's error text reaches the model
DISCOVERY_TIMEOUT_S = 10.0
SEPARATOR = "__"  # <server>__<tool>
_TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,30}")


@dataclass(frozen=True)
class Route:
    """Arguments matching every condition of ``when`` raise the call to ``side_effect``."""

    when: tuple[tuple[str, tuple[Any, ...]], ...]
    side_effect: SideEffect
    reason: str

    def matches(self, arguments: dict[str, Any]) -> bool:
        return all(arguments.get(name) in values for name, values in self.when)


@dataclass(frozen=True)
class Patch:
    """What the host declares about a third-party tool."""

    side_effect: SideEffect = SideEffect.HIGH
    readonly: bool = False
    idempotent: bool = False
    latency_ms: int = 2000
    roles: frozenset[str] = frozenset()
    max_output_bytes: int = 4096
    idempotency_argument: str | None = None
    routes: tuple[Route, ...] = ()
    patched: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any], *, default_roles: frozenset[str]) -> Patch:
        routes = tuple(
            Route(
                when=tuple(
                    (str(k), tuple(v) if isinstance(v, list) else (v,))
                    for k, v in sorted(rule["when"].items())
                ),
                side_effect=SideEffect(rule["side_effect"]),
                reason=str(rule.get("reason", "a routed argument")),
            )
            for rule in data.get("routes", ())
        )
        readonly = bool(data.get("readonly", False))
        return cls(
            side_effect=SideEffect(data.get("side_effect", SideEffect.HIGH)),
            readonly=readonly,
            idempotent=bool(data.get("idempotent", readonly)),
            latency_ms=int(data.get("latency_ms", 2000)),
            roles=frozenset(data.get("roles", default_roles)),
            max_output_bytes=int(data.get("max_output_bytes", 4096)),
            idempotency_argument=data.get("idempotency_argument"),
            routes=routes,
            patched=True,
        )


@dataclass(frozen=True)
class ExternalServer:
    name: str
    url: str | None = None
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # for a stdio command
    roles: frozenset[str] = frozenset({"employees"})
    patches: dict[str, Patch] = field(default_factory=dict, hash=False, compare=False)

    def patch_for(self, tool: str) -> Patch:
        """The tool's patch; without one: HIGH, not read-only, not idempotent."""
        return self.patches.get(tool) or Patch(roles=self.roles)


def servers_from_settings(raw: str | None = None) -> list[ExternalServer]:
    raw = settings.MCP_GATEWAY_SERVERS if raw is None else raw
    if not raw.strip():
        return []
    if raw.startswith("@"):
        raw = Path(raw[1:]).read_text()
    servers = []
    for entry in json.loads(raw):
        roles = frozenset(entry.get("roles", ["employees"]))
        name = str(entry["name"])
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,30}", name):
            raise ValueError(f"gateway server name {name!r}: lower-case letters, digits, _")
        if bool(entry.get("url")) == bool(entry.get("command")):
            raise ValueError(f"gateway server {name}: give either url or command")
        servers.append(
            ExternalServer(
                name=name,
                url=entry.get("url"),
                command=tuple(entry.get("command") or ()),
                env=tuple(sorted((entry.get("env") or {}).items())),
                roles=roles,
                patches={
                    tool: Patch.from_json(p, default_roles=roles)
                    for tool, p in entry.get("tools", {}).items()
                },
            )
        )
    return servers


# --- talking to a server ----------------------------------------------------------------------


def _connect(server: ExternalServer) -> Client:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    # "auto": server/discover first (2026-07-28, stateless), the initialize handshake for a
    # server of an earlier revision.
    if server.url:
        return Client(server.url, mode="auto")
    command, *args = server.command
    params = StdioServerParameters(command=command, args=args, env=dict(server.env) or None)
    return Client(params, mode="auto")


def _run(fn: Callable[[], Awaitable[Any]]) -> Any:
    """Run async client code from sync code: here when no event loop runs in this thread,
    else on a thread of its own."""
    try:
        import asyncio

        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(fn)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, fn).result()


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _list_tools(server: ExternalServer) -> list[types.Tool]:
    with anyio.fail_after(DISCOVERY_TIMEOUT_S):
        async with _connect(server) as client:
            return list((await client.list_tools()).tools)


# --- translation ------------------------------------------------------------------------------


def _quote(server: str, text: str) -> str:
    text = " ".join(str(text).split())
    if len(text) > QUOTE_CHARS:
        text = text[:QUOTE_CHARS] + "…"
    return f'{server} answered: "{text}"'


_HINTS = {
    Reason.INVALID_INPUT: "Fix the arguments; do not resend them unchanged.",
    Reason.NOT_FOUND: "Check the identifiers; do not retry the same call.",
    Reason.FORBIDDEN: "The external service refused this; tell the user.",
    Reason.CONFLICT: "The external state changed or already holds this; read it first.",
    Reason.UNAVAILABLE: "The external service is failing for now; try again later.",
    Reason.RATE_LIMITED: "The external service is throttling; wait before calling again.",
}
_TEXT_RULES = (  # the first that matches an isError text decides
    (re.compile(r"rate.?limit|too many|throttl", re.I), Reason.RATE_LIMITED),
    (re.compile(r"temporar|try again|unavailable|timed? ?out|overload", re.I), Reason.UNAVAILABLE),
    (re.compile(r"not found|no such|does not exist|unknown", re.I), Reason.NOT_FOUND),
    (re.compile(r"forbidden|denied|not allowed|unauthori|permission", re.I), Reason.FORBIDDEN),
    (re.compile(r"conflict|already|duplicate", re.I), Reason.CONFLICT),
)


def translate_rpc_error(server: str, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error of the third party as a red or yellow envelope."""
    if code in (types.INVALID_PARAMS, types.INVALID_REQUEST, types.PARSE_ERROR):
        reason = Reason.INVALID_INPUT
    elif code == types.METHOD_NOT_FOUND:
        reason = Reason.NOT_FOUND
    elif code == types.INTERNAL_ERROR or -32099 <= code <= -32000:
        reason = Reason.UNAVAILABLE
    else:
        reason = Reason.INVALID_INPUT
    envelope = failure(reason, f"external_rpc_{abs(code)}", _quote(server, message), _HINTS[reason])
    envelope["external"] = {"server": server, "jsonrpc_code": code}
    return envelope


def _texts(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


def translate_result(server: str, result: types.CallToolResult, *, cap: int) -> dict[str, Any]:
    """A third party's tool result as an envelope: ``isError`` by its text, success as data
    (its structured content, else its text, quoted and capped)."""
    if result.is_error:
        text = _texts(result)
        reason = next((r for rx, r in _TEXT_RULES if rx.search(text)), Reason.INVALID_INPUT)
        envelope = failure(
            reason,
            "external_tool_error",
            _quote(server, text or "an error without text"),
            _HINTS[reason],
            1000 if reason.signal.value == "yellow" else None,
        )
        envelope["external"] = {"server": server, "is_error": True}
        return envelope
    if isinstance(result.structured_content, dict):
        return success(result.structured_content)
    text = _texts(result)
    budget = max(0, cap // 2)
    return success({"text_quote": text[:budget], "truncated": len(text) > budget})


# --- tool specs -------------------------------------------------------------------------------


def _input_model(schema: dict[str, Any], host_argument: str | None) -> type[BaseModel]:
    """Arguments checked against the third party's own input schema, minus the argument the
    host fills in (the idempotency key), which a caller may not send."""
    shown = copy.deepcopy(schema) or {"type": "object"}
    if host_argument:
        shown.get("properties", {}).pop(host_argument, None)
        if host_argument in shown.get("required", []):
            shown["required"] = [r for r in shown["required"] if r != host_argument]
    validator = jsonschema.validators.validator_for(shown)(shown)

    class ExternalArguments(BaseModel):
        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _check(cls, data: Any) -> Any:
            if host_argument and isinstance(data, dict) and host_argument in data:
                raise ValueError(f"{host_argument} is set by the host, never by the caller")
            problems = [
                f"{'.'.join(map(str, e.path)) or '(root)'}: {e.message}"
                for e in sorted(validator.iter_errors(data), key=lambda e: list(e.path))[:5]
            ]
            if problems:
                raise ValueError("; ".join(problems))
            return data

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(shown)

    return ExternalArguments


def _output_model(schema: dict[str, Any] | None) -> type[BaseModel]:
    """The third party's answer checked against its own declared output schema (MCP: a tool
    that declares one must answer structured content that conforms), else against the shape
    of a quoted text answer. Tool output is untrusted: an answer outside it is never passed on
    (the runtime's output check refuses a read's and reconciles a write's, invoke._off_model)."""
    shown = copy.deepcopy(schema) or {
        "type": "object",
        "properties": {"text_quote": {"type": "string"}, "truncated": {"type": "boolean"}},
        "required": ["text_quote", "truncated"],
        "additionalProperties": False,
    }
    validator = jsonschema.validators.validator_for(shown)(shown)

    class ExternalOutput(BaseModel):
        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _check(cls, data: Any) -> Any:
            problems = [
                f"{'.'.join(map(str, e.path)) or '(root)'}: {e.message}"
                for e in sorted(validator.iter_errors(data), key=lambda e: list(e.path))[:5]
            ]
            if problems:
                raise ValueError("; ".join(problems))
            return data

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(shown)

    return ExternalOutput


def _description(server: ExternalServer, tool: types.Tool, patch: Patch) -> ToolDescription:
    remote = " ".join((tool.description or tool.name).split())[:500]
    policy = (
        "every call needs a human approval"
        if patch.side_effect == SideEffect.HIGH
        else f"risk {patch.side_effect.value}"
    )
    routes = "; ".join(
        f"{', '.join(f'{k} in {list(v)}' for k, v in r.when)} -> {r.side_effect.value}"
        for r in patch.routes
    )
    return ToolDescription(
        summary=f"[external, via the gateway: {server.name}] {remote}",
        when_to_use="When the task needs this external service and none of the host's own "
        "tools does it.",
        differs_from="A third-party tool: its metadata is the host's patch, not its own claim.",
        parameters="As in the input schema."
        + (
            f" {patch.idempotency_argument} is set by the host."
            if patch.idempotency_argument
            else ""
        ),
        constraints=("Read-only" if patch.readonly else "Has side effects")
        + f"; {policy}"
        + (f"; routed: {routes}" if routes else "")
        + ("" if patch.patched else "; no local patch: treated as HIGH and not read-only")
        + f"; timeout {3 * patch.latency_ms / 1000:.1f}s.",
        example="(none: see the external server's own description)",
    )


def _handler(
    server: ExternalServer, remote: str, patch: Patch
) -> Callable[[CallContext, BaseModel], dict[str, Any]]:
    def handle(ctx: CallContext, args: BaseModel) -> dict[str, Any]:
        arguments = args.model_dump(mode="json")
        if patch.idempotency_argument and ctx.idempotency_key:
            arguments[patch.idempotency_argument] = ctx.idempotency_key
        sent = False

        async def call() -> types.CallToolResult:
            nonlocal sent
            async with _connect(server) as client:
                sent = True
                return await client.call_tool(remote, arguments)

        try:
            result = _run(call)
        except BaseException as raised:
            exc = _unwrap(raised)
            if isinstance(exc, MCPError):
                return translate_rpc_error(server.name, exc.code, exc.message)
            if not isinstance(exc, Exception):
                raise
            if sent and not patch.readonly:
                # The request may have reached the third party: the outcome is unknown.
                raise LostReceiptError(f"{server.name}: {type(exc).__name__}") from exc
            return failure(
                Reason.UNAVAILABLE,
                "external_unavailable",
                f"{server.name} could not be reached ({type(exc).__name__}).",
                _HINTS[Reason.UNAVAILABLE],
                1000,
            )
        return translate_result(server.name, result, cap=patch.max_output_bytes)

    return handle


def _assess(patch: Patch) -> Callable[[CallContext, BaseModel], Risk]:
    def assess(ctx: CallContext, args: BaseModel) -> Risk:
        arguments = args.model_dump(mode="json")
        level, reasons = patch.side_effect, []
        if not patch.patched:
            reasons.append("an external tool without a local patch")
        for route in patch.routes:
            if route.matches(arguments):
                reasons.append(route.reason)
                if route.side_effect.rank > level.rank:
                    level = route.side_effect
        return Risk(level=level, reasons=tuple(reasons))

    return assess


def _lookup_receipt(key: str) -> ReceiptLookup:
    return ReceiptLookup(
        ReceiptStatus.UNKNOWN,
        detail="a third-party MCP server cannot be asked what happened under a key",
    )


def _verify(receipt: dict[str, Any], ctx: CallContext) -> Verification:
    return Verification(True, "the external server's own answer; not independently verifiable")


def tool_spec(server: ExternalServer, tool: types.Tool) -> ToolSpec:
    patch = server.patch_for(tool.name)
    return ToolSpec(
        name=f"{server.name}{SEPARATOR}{tool.name}"[:64],
        description=_description(server, tool, patch),
        input_model=_input_model(dict(tool.input_schema or {}), patch.idempotency_argument),
        output_model=_output_model(dict(tool.output_schema) if tool.output_schema else None),
        meta=ToolMeta(
            readonly=patch.readonly,
            side_effect=patch.side_effect,
            enforced_idempotent=patch.idempotent,
            estimated_latency_ms=patch.latency_ms,
            roles=patch.roles or server.roles,
            max_output_bytes=patch.max_output_bytes,
            open_world=True,
        ),
        handler=_handler(server, tool.name, patch),
        lookup_receipt=_lookup_receipt,
        verify=_verify,
        assess_risk=_assess(patch),
    )


def gateway_register(servers: list[ExternalServer] | None = None) -> list[ToolSpec]:
    """Discover each configured server's tools (tools/list) and register them. A server that
    does not answer is logged and skipped; its tools are simply not offered."""
    servers = servers_from_settings() if servers is None else servers
    specs: list[ToolSpec] = []
    for server in servers:
        try:
            tools = _run(functools.partial(_list_tools, server))
        except BaseException as raised:
            exc = _unwrap(raised)
            if not isinstance(exc, Exception):
                raise
            log.warning("MCP gateway: %s did not list its tools: %r", server.name, exc)
            continue
        for tool in tools:
            if not _TOOL_NAME.fullmatch(tool.name):  # a third party's name is untrusted too
                log.warning(
                    "MCP gateway: %s offers a tool named %r: skipped", server.name, tool.name[:80]
                )
                continue
            spec = tool_spec(server, tool)
            services.tool_register(spec)
            specs.append(spec)
    return specs


def gateway_unregister(specs: list[ToolSpec]) -> None:
    for spec in specs:
        services.tool_unregister(spec.name)
