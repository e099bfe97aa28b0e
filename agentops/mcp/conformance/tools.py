"""Tools that answer at once (content of each kind, an error, progress, logging, a JSON Schema
2020-12 input), and the handshake era's (2025-11-25) tools that ask the client over the session:
sampling and elicitation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import mcp_types as types

from agentops.mcp.conformance._base import (
    PNG,
    WAV,
    Ctx,
    Era,
    ToolAnswer,
    embedded,
    require,
    text_result,
    tool,
)

# --- tools: content of each kind -----------------------------------------------------------------


@tool("test_simple_text", "Returns a simple text.")
async def simple_text(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return text_result("This is a simple text response for testing.")


@tool("test_image_content", "Returns a 1x1 PNG.")
async def image_content(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return types.CallToolResult(
        content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")]
    )


@tool("test_audio_content", "Returns a short silent WAV.")
async def audio_content(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return types.CallToolResult(
        content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]
    )


@tool("test_embedded_resource", "Returns an embedded text resource.")
async def embedded_resource(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return types.CallToolResult(
        content=[
            embedded(
                "test://embedded-resource", "text/plain", "This is an embedded resource content."
            )
        ]
    )


@tool("test_multiple_content_types", "Returns text, an image and an embedded resource.")
async def multiple_content_types(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    data = json.dumps({"test": "data", "value": 123})
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="Multiple content types test:"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            embedded("test://mixed-content-resource", "application/json", data),
        ]
    )


@tool("test_error_handling", "Always fails (isError).")
async def error_handling(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return text_result("This tool intentionally returns an error for testing", is_error=True)


@tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.")
async def tool_with_progress(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    for done in (0, 50, 100):
        await ctx.session.report_progress(done, 100)
        if done < 100:
            await asyncio.sleep(0.05)
    return text_result("Progress reported: 0, 50, 100 of 100.")


async def _log_three(ctx: Ctx) -> types.CallToolResult:
    """Three info entries; on 2026-07-28 the session sends them only to a request that asked for
    a log level (``_meta``), which is what the stateless scenario checks."""
    for step, message in enumerate(
        ("Tool execution started", "Tool processing data", "Tool execution completed")
    ):
        if step:
            await asyncio.sleep(0.05)
        await ctx.session.send_log_message("info", message, related_request_id=ctx.request_id)
    return text_result("Logged three messages.")


@tool("test_tool_with_logging", "Sends three info log notifications.")
async def tool_with_logging(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return await _log_three(ctx)


@tool("test_logging_tool", "Sends three info log notifications (when a log level was asked for).")
async def logging_tool(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return await _log_three(ctx)


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@tool(
    "json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", schema=JSON_SCHEMA_2020_12
)
async def json_schema_2020_12(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return text_result(json.dumps(params.arguments or {}))


# --- tools: asking the client over the session (handshake era) -----------------------------------


@tool(
    "test_sampling",
    "Asks the client's LLM (sampling/createMessage).",
    schema={"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    era=Era.HANDSHAKE,
)
async def sampling(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    require(ctx, sampling={})
    text = str((params.arguments or {}).get("prompt", ""))
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    answer = await ctx.session.create_message(
        [message], max_tokens=100, related_request_id=ctx.request_id
    )
    content = answer.content
    reply = content.text if isinstance(content, types.TextContent) else "(no text)"
    return text_result(f"LLM response: {reply}")


async def _elicit_over_session(ctx: Ctx, message: str, schema: dict[str, Any]) -> ToolAnswer:
    require(ctx, elicitation={})
    answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return text_result(
        f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"
    )


@tool(
    "test_elicitation",
    "Asks the user (elicitation/create) for a username and an email.",
    schema={
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
    era=Era.HANDSHAKE,
)
async def elicitation(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return await _elicit_over_session(ctx, str((params.arguments or {}).get("message", "")), schema)


@tool(
    "test_elicitation_sep1034_defaults",
    "Elicits with a default for each primitive type.",
    era=Era.HANDSHAKE,
)
async def elicitation_defaults(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "default": True},
        },
    }
    return await _elicit_over_session(ctx, "Please review your details", schema)


def _choices(prefix: str, titles: tuple[str, ...]) -> list[dict[str, str]]:
    return [{"const": f"{prefix}{i}", "title": title} for i, title in enumerate(titles, 1)]


@tool("test_elicitation_sep1330_enums", "Elicits with the five kinds of enum.", era=Era.HANDSHAKE)
async def elicitation_enums(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    options = ["option1", "option2", "option3"]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {
                "type": "string",
                "oneOf": _choices("value", ("First Option", "Second Option", "Third Option")),
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": _choices("value", ("First Choice", "Second Choice", "Third Choice"))
                },
            },
        },
    }
    return await _elicit_over_session(ctx, "Please choose", schema)
