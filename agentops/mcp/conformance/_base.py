"""What the fixtures share: their registries (a fixture is listed and served from one table
entry), the era each belongs to, and the shapes of what they answer and ask."""

from __future__ import annotations

import base64
import enum
import io
import json
import wave
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

Ctx = ServerRequestContext[Any, Any]
# A task-supporting fixture may also answer a CreateTaskResult, which the SDK has no model of.
ToolAnswer = types.CallToolResult | types.InputRequiredResult | dict[str, Any]
ToolRun = Callable[[Ctx, types.CallToolRequestParams], Awaitable[ToolAnswer]]
TaskSupport = Literal["optional", "required"]
PromptAnswer = types.GetPromptResult | types.InputRequiredResult
PromptRun = Callable[[Ctx, types.GetPromptRequestParams], PromptAnswer]


# A 1x1 red PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def _silent_wav() -> str:
    """A tenth of a second of 8 kHz mono silence, as base64."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(1)
        out.setframerate(8000)
        out.writeframes(b"\x80" * 800)
    return base64.b64encode(buffer.getvalue()).decode()


WAV = _silent_wav()


class Era(enum.StrEnum):
    """Which protocol era a fixture belongs to: the handshake fixtures ask the client over the
    session's back channel; the 2026-07-28 ones answer ``input_required`` instead."""

    HANDSHAKE = "handshake"
    MODERN = "modern"
    BOTH = "both"


def era_of(ctx: Ctx) -> Era:
    return Era.MODERN if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else Era.HANDSHAKE


@dataclass(frozen=True)
class FixtureTool:
    tool: types.Tool
    run: ToolRun
    era: Era = Era.BOTH


@dataclass(frozen=True)
class FixturePrompt:
    prompt: types.Prompt
    render: PromptRun
    era: Era = Era.BOTH


TOOLS: dict[str, FixtureTool] = {}
PROMPTS: dict[str, FixturePrompt] = {}
NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def serves(era: Era, ctx: Ctx) -> bool:
    return era in (Era.BOTH, era_of(ctx))


def tool(
    name: str,
    description: str,
    *,
    schema: dict[str, Any] | None = None,
    era: Era = Era.BOTH,
    task_support: TaskSupport | None = None,
) -> Callable[[ToolRun], ToolRun]:
    execution = None if task_support is None else types.ToolExecution(task_support=task_support)

    def register(run: ToolRun) -> ToolRun:
        spec = types.Tool(
            name=name,
            description=description,
            input_schema=schema or NO_ARGUMENTS,
            execution=execution,
        )
        TOOLS[name] = FixtureTool(spec, run, era)
        return run

    return register


def prompt(
    name: str,
    description: str,
    *,
    arguments: tuple[str, ...] = (),
    era: Era = Era.BOTH,
) -> Callable[[PromptRun], PromptRun]:
    def register(render: PromptRun) -> PromptRun:
        spec = types.Prompt(
            name=name,
            description=description,
            arguments=[types.PromptArgument(name=a, required=True) for a in arguments] or None,
        )
        PROMPTS[name] = FixturePrompt(spec, render, era)
        return render

    return register


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )


def user_message(content: types.ContentBlock) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


# --- what to ask the client (2026-07-28: embedded in input_required) ----------------------------


def elicit(message: str, properties: dict[str, Any]) -> types.ElicitRequest:
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def sample(text: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


NAME_REQUEST = elicit("What is your name?", {"name": {"type": "string"}})
CONFIRM_REQUEST = elicit("Please confirm", {"ok": {"type": "boolean"}})
ROOTS_REQUEST = types.ListRootsRequest()


def declared_capabilities(ctx: Ctx) -> types.ClientCapabilities:
    return ctx.session.client_capabilities or types.ClientCapabilities()


def require(ctx: Ctx, **required: Any) -> None:
    """Refuse (-32021) unless this request's client declared every capability named."""
    declared = declared_capabilities(ctx)
    missing = {name: value for name, value in required.items() if getattr(declared, name) is None}
    if missing:
        data = types.MissingRequiredClientCapabilityErrorData(
            required_capabilities=types.ClientCapabilities.model_validate(missing)
        )
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Client did not declare: {', '.join(sorted(missing))}",
            data.model_dump(by_alias=True, mode="json", exclude_none=True),
        )


def answer_of(
    params: types.CallToolRequestParams | types.GetPromptRequestParams, key: str, kind: type
) -> Any:
    """The client's answer under ``key`` when it is of the expected kind, else None."""
    answer = (params.input_responses or {}).get(key)
    return answer if isinstance(answer, kind) else None


def accepted(
    params: types.CallToolRequestParams | types.GetPromptRequestParams, key: str
) -> dict[str, Any] | None:
    answer = answer_of(params, key, types.ElicitResult)
    return answer.content or {} if answer is not None and answer.action == "accept" else None


def sampled_text(answer: types.CreateMessageResult) -> str:
    content = answer.content
    return content.text if isinstance(content, types.TextContent) else "(no text)"


def embedded(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=text),
    )


def needs_input(
    requests: dict[str, types.InputRequest], state: dict[str, Any] | None = None
) -> types.InputRequiredResult:
    return types.InputRequiredResult(
        input_requests=requests,
        request_state=None if state is None else json.dumps(state),
    )


def state_of(params: types.CallToolRequestParams | types.GetPromptRequestParams) -> dict[str, Any]:
    """The plaintext state the boundary verified (it refuses one this server did not mint)."""
    if params.request_state is None:
        return {}
    state = json.loads(params.request_state)
    return state if isinstance(state, dict) else {}


def prompt_result(*messages: types.PromptMessage) -> types.GetPromptResult:
    return types.GetPromptResult(messages=list(messages))
