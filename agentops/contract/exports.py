"""Tool definitions for the outside: the JSON API, OpenAI function calling and MCP. Derived
from each tool's declaration, never written twice; cached per tool (specs are immutable)."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel

from agentops.contract import Reason, Signal, ToolSpec


@functools.cache
def input_schema(spec: ToolSpec[Any]) -> dict[str, Any]:
    model: type[BaseModel] = spec.input_model
    return model.model_json_schema()


@functools.cache
def output_schema(spec: ToolSpec[Any]) -> dict[str, Any]:
    return spec.output_model.model_json_schema(mode="serialization")


def metadata(spec: ToolSpec[Any]) -> dict[str, Any]:
    m = spec.meta
    return {
        "readonly": m.readonly,
        "side_effect": m.side_effect.value,
        "enforced_idempotent": m.enforced_idempotent,
        "estimated_latency_ms": m.estimated_latency_ms,
        "timeout_ms": int(m.timeout_s * 1000),
        "max_output_bytes": m.max_output_bytes,
        "roles": sorted(m.roles),
    }


@functools.cache
def openai_function(spec: ToolSpec[Any]) -> dict[str, Any]:
    """An OpenAI function-calling tool definition."""
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description.render(),
            "parameters": input_schema(spec),
        },
    }


TRUNCATED = (
    "The answer was cut to the tool's max_output_bytes (see hint). A page of a list "
    "(has_more, next_cursor) never loses items to the cut: it shrinks to fit and keeps its "
    "cursor, or is refused (page_too_large)."
)


def envelope_schema(data: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a result envelope (MCP's ``structuredContent``, on success and on
    error alike) whose ``data`` is described by ``data``. Definitions move to the root so that
    their references still resolve."""
    data = dict(data)
    defs = data.pop("$defs", None)
    nullable_string = {"type": ["string", "null"]}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "signal": {"type": "string", "enum": [s.value for s in Signal]},
            "data": data,
            "next_cursor": nullable_string,
            "observed_at": nullable_string,
            "reason": {"type": "string", "enum": [r.value for r in Reason]},
            "code": {"type": "string"},
            "message": {"type": "string"},
            "hint": {"type": "string"},
            "truncated": {"type": "boolean", "description": TRUNCATED},
            "retry_after_ms": {"type": ["integer", "null"]},
            "pending": {"type": "object"},
        },
        "required": ["ok", "signal"],
    }
    if defs:
        schema["$defs"] = defs
    return schema


@functools.cache
def mcp_tool(spec: ToolSpec[Any]) -> dict[str, Any]:
    """An MCP tool definition; annotations are derived from the metadata, not written by hand.
    The output schema describes the envelope (``structuredContent``) around the tool's output."""
    m = spec.meta
    return {
        "name": spec.name,
        "title": spec.name.replace("_", " ").capitalize(),
        "description": spec.description.render(),
        "inputSchema": input_schema(spec),
        "outputSchema": envelope_schema(output_schema(spec)),
        "annotations": {
            "readOnlyHint": m.readonly,
            # MCP's conservative default for any write: the client should confirm.
            "destructiveHint": not m.readonly,
            "idempotentHint": m.readonly or m.enforced_idempotent,
            "openWorldHint": m.open_world,
        },
    }


@functools.cache
def describe(spec: ToolSpec[Any]) -> dict[str, Any]:
    """What GET /api/tools shows for one tool."""
    return {
        "name": spec.name,
        "description": spec.description.render(),
        "input_schema": input_schema(spec),
        "output_schema": output_schema(spec),
        "metadata": metadata(spec),
    }
