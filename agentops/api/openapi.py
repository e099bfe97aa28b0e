"""The JSON API's OpenAPI 3.1 document, built from the tool registry (each tool's input and output
models) and the run endpoints' shapes: nothing about a tool is written here a second time."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agentops.contract import Reason, Signal, ToolSpec
from agentops.contract.exports import TRUNCATED
from agentops.selectors import MAX_REQUEST_CHARS, ScopeIn, tools_all

REF = "#/components/schemas/{model}"
MAX_IDEMPOTENCY_KEY = 100


def _error(*codes: str) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", **({"enum": list(codes)} if codes else {})},
                    "message": {"type": "string"},
                },
            }
        },
    }


RETRY_AFTER = {
    "description": "Seconds to wait before calling again.",
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}


def _json(schema: dict[str, Any], description: str, *, retry_after: bool = False) -> dict[str, Any]:
    answer = {"description": description, "content": {"application/json": {"schema": schema}}}
    if retry_after:
        answer["headers"] = {"Retry-After": RETRY_AFTER}
    return answer


def _failure() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["ok", "signal", "reason", "code", "message", "hint", "retry_after_ms"],
        "properties": {
            "ok": {"const": False},
            "signal": {"enum": [s.value for s in Signal if s != Signal.GREEN]},
            "reason": {"enum": [r.value for r in Reason]},
            "code": {"type": "string"},
            "message": {"type": "string"},
            "hint": {"type": "string"},
            "retry_after_ms": {"type": ["integer", "null"]},
            "detail": {"type": "object"},
            "pending": {
                "type": "object",
                "required": ["run_id", "action_id", "poll", "deadline"],
                "properties": {
                    "run_id": {"type": "string", "format": "uuid"},
                    "action_id": {"type": "string", "format": "uuid"},
                    "poll": {"type": "string"},
                    "deadline": {"type": "string", "format": "date-time"},
                },
            },
        },
    }


def _success(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["ok", "signal", "data", "next_cursor", "observed_at"],
        "properties": {
            "ok": {"const": True},
            "signal": {"const": Signal.GREEN.value},
            "data": data,
            "next_cursor": {"type": ["string", "null"]},
            "observed_at": {"type": ["string", "null"]},
            "truncated": {"type": "boolean", "description": TRUNCATED},
            "hint": {"type": "string"},
        },
    }


def _hoisted(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """A pydantic schema with its $defs moved to components (refs already point there)."""
    schema = dict(schema)
    components.update(schema.pop("$defs", {}))
    return schema


def _tool_operation(spec: ToolSpec, components: dict[str, Any]) -> dict[str, Any]:
    name = spec.name
    input_schema = _hoisted(spec.input_model.model_json_schema(ref_template=REF), components)
    output_schema = _hoisted(
        spec.output_model.model_json_schema(ref_template=REF, mode="serialization"), components
    )
    components[f"{name}_input"] = input_schema
    components[f"{name}_output"] = output_schema
    envelope = {
        "oneOf": [
            _success({"$ref": REF.format(model=f"{name}_output")}),
            _failure(),
        ]
    }
    parameters = []
    if not spec.meta.readonly:
        parameters.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": "Retries with the same key replay the first answer.",
                "schema": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_IDEMPOTENCY_KEY,
                    "pattern": "^[\\x20-\\x7e]+$",
                },
            }
        )
    return {
        "operationId": f"tool_{name}",
        "summary": spec.description.summary,
        "description": spec.description.render(),
        "tags": ["tools"],
        "parameters": parameters,
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": REF.format(model=f"{name}_input")}}
            },
        },
        "responses": {
            "200": _json(envelope, "The call's envelope: a result, or why not (nothing written)."),
            **(
                {}
                if spec.meta.readonly
                else {"202": _json(_failure(), "Waits for a human approval; poll the run.")}
            ),
            "400": _json(
                _error(
                    "malformed_json",
                    "too_deep",
                    "string_too_long",
                    "bad_idempotency_key",
                    "bad_request",
                ),
                "The body is not JSON the runtime accepts.",
            ),
            "401": _json(_error(), "No valid session or bearer token."),
            "403": _json(_error(), "CSRF failed for a session-authenticated call."),
            "413": _json(_error("too_large"), "The body is over the size cap."),
            "415": _json(_error("unsupported_media_type"), "The body is a form, not JSON."),
            "429": _json(
                _failure(),
                "Too many calls this minute (see the Retry-After header and retry_after_ms).",
                retry_after=True,
            ),
            "503": _json(
                _failure(), "The rate limiter did not answer; nothing was called.", retry_after=True
            ),
        },
    }


def _run_paths(components: dict[str, Any]) -> dict[str, Any]:
    run_schema = {
        "type": "object",
        "required": ["run_id", "kind", "status", "events", "receipts"],
        "properties": {
            "run_id": {"type": "string", "format": "uuid"},
            "kind": {"type": "string"},
            "status": {"type": "string"},
            "outcome": {"type": "string"},
            "reply": {"type": "string"},
            "goal": {"type": "string"},
            "conversation_id": {"type": ["string", "null"], "format": "uuid"},
            "delegation": {"type": "object"},
            "turn": {"type": "integer"},
            "created_at": {"type": "string", "format": "date-time"},
            "finished_at": {"type": ["string", "null"], "format": "date-time"},
            "events": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["seq", "kind", "at", "payload"],
                    "properties": {
                        "seq": {"type": "integer"},
                        "kind": {"type": "string"},
                        "at": {"type": "string", "format": "date-time"},
                        "action_id": {"type": "string"},
                        "payload": {"type": "object"},
                    },
                },
            },
            "receipts": {"type": "array", "items": {"type": "object"}},
        },
    }
    scope = _hoisted(ScopeIn.model_json_schema(ref_template=REF), components)
    scope["description"] = "Narrows what the request delegates (never widens it)."
    common = {
        "401": _json(_error(), "No valid session or bearer token."),
        "403": _json(_error(), "CSRF failed for a session-authenticated call."),
    }
    return {
        "/api/runs": {
            "post": {
                "operationId": "runs_create",
                "summary": "Start an assistant run for the signed-in user.",
                "tags": ["runs"],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["request"],
                                "additionalProperties": False,
                                "properties": {
                                    "request": {
                                        "type": "string",
                                        "minLength": 1,
                                        "maxLength": MAX_REQUEST_CHARS,
                                    },
                                    "scope": scope,
                                    "conversation_id": {
                                        "type": "string",
                                        "format": "uuid",
                                        "description": (
                                            "Continue this conversation (the conversation_id "
                                            "of an earlier run's answer): the request is read "
                                            "with its earlier turns. Omitted: a new one."
                                        ),
                                    },
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "202": _json(
                        {
                            "type": "object",
                            "required": ["run_id", "status", "conversation_id"],
                            "properties": {
                                "run_id": {"type": "string", "format": "uuid"},
                                "status": {"type": "string"},
                                "conversation_id": {"type": "string", "format": "uuid"},
                            },
                        },
                        "The run started; poll it.",
                    ),
                    "400": _json(_error(), "Not a request the assistant can start from."),
                    "413": _json(_error("too_large"), "The body is over the size cap."),
                    "415": _json(_error("unsupported_media_type"), "The body is a form, not JSON."),
                    "429": _json(
                        _error("rate_limited"), "Too many runs this minute.", retry_after=True
                    ),
                    "503": _json(
                        _error("unavailable"), "The rate limiter did not answer.", retry_after=True
                    ),
                    **common,
                },
            }
        },
        "/api/runs/{run_id}": {
            "get": {
                "operationId": "runs_detail",
                "summary": "A run of the signed-in user, with its trace and receipts.",
                "tags": ["runs"],
                "parameters": [
                    {
                        "name": "run_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "format": "uuid"},
                    }
                ],
                "responses": {
                    "200": _json(run_schema, "The run."),
                    "404": _json(_error("not_found"), "No such run of yours."),
                    **common,
                },
            }
        },
        "/api/tools": {
            "get": {
                "operationId": "tools_list",
                "summary": "The tools visible to the signed-in user, with schemas and metadata.",
                "tags": ["tools"],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["tools"],
                            "properties": {"tools": {"type": "array", "items": {"type": "object"}}},
                        },
                        "The visible tools.",
                    ),
                    **common,
                },
            }
        },
    }


def openapi_document() -> dict[str, Any]:
    components: dict[str, Any] = {}
    paths = _run_paths(components)
    for spec in tools_all():
        paths[f"/api/tools/{spec.name}"] = {"post": _tool_operation(spec, components)}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Meeting rooms: governed tool calls",
            "version": "1",
            "description": (
                "Every tool call goes through the runtime's gate (schema, role, scope, budget, "
                "policy) and is recorded. Identity comes from the session or bearer token, "
                f"never from the body. Bodies over {settings.API_MAX_BODY_BYTES} bytes are 413; "
                f"JSON deeper than {settings.API_MAX_JSON_DEPTH} or with strings over "
                f"{settings.API_MAX_STRING_CHARS} characters is 400. A direct call is recorded "
                "as a one-call run."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
