"""The prompts, resources, resource template and completions of the scenarios, and their
handlers (the product serves none of these)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.context import HandlerResult
from mcp.shared.exceptions import MCPError

from agentops.mcp.conformance._base import (
    PNG,
    PROMPTS,
    Ctx,
    PromptAnswer,
    embedded,
    prompt,
    prompt_result,
    serves,
    user_message,
)

# --- prompts -------------------------------------------------------------------------------------


@prompt("test_simple_prompt", "A prompt without arguments.")
def simple_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> PromptAnswer:
    return prompt_result(
        user_message(types.TextContent(type="text", text="This is a simple prompt for testing."))
    )


@prompt("test_prompt_with_arguments", "A prompt with two arguments.", arguments=("arg1", "arg2"))
def prompt_with_arguments(ctx: Ctx, params: types.GetPromptRequestParams) -> PromptAnswer:
    args = params.arguments or {}
    text = f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"
    return prompt_result(user_message(types.TextContent(type="text", text=text)))


@prompt(
    "test_prompt_with_embedded_resource",
    "A prompt embedding the resource it is given.",
    arguments=("resourceUri",),
)
def prompt_with_embedded_resource(ctx: Ctx, params: types.GetPromptRequestParams) -> PromptAnswer:
    uri = (params.arguments or {})["resourceUri"]
    return prompt_result(
        user_message(embedded(uri, "text/plain", "Embedded resource content for testing.")),
        user_message(
            types.TextContent(type="text", text="Please process the embedded resource above.")
        ),
    )


@prompt("test_prompt_with_image", "A prompt with an image.")
def prompt_with_image(ctx: Ctx, params: types.GetPromptRequestParams) -> PromptAnswer:
    return prompt_result(
        user_message(types.ImageContent(type="image", data=PNG, mime_type="image/png")),
        user_message(types.TextContent(type="text", text="Please analyze the image above.")),
    )


async def list_prompts(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[p.prompt for p in PROMPTS.values() if serves(p.era, ctx)]
    )


async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> PromptAnswer:
    fixture = PROMPTS.get(params.name)
    if fixture is None or not serves(fixture.era, ctx):
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name[:64]}")
    missing = [
        a.name
        for a in fixture.prompt.arguments or []
        if a.required and a.name not in (params.arguments or {})
    ]
    if missing:
        raise MCPError(types.INVALID_PARAMS, f"Missing prompt arguments: {', '.join(missing)}")
    return fixture.render(ctx, params)


# --- resources -----------------------------------------------------------------------------------

RESOURCES: dict[str, tuple[types.Resource, types.TextResourceContents | types.BlobResourceContents]]
RESOURCES = {
    uri: (
        types.Resource(uri=uri, name=name, description=description, mime_type=contents.mime_type),
        contents,
    )
    for uri, name, description, contents in (
        (
            "test://static-text",
            "static-text",
            "A static text resource.",
            types.TextResourceContents(
                uri="test://static-text",
                mime_type="text/plain",
                text="This is the content of the static text resource.",
            ),
        ),
        (
            "test://static-binary",
            "static-binary",
            "A static binary resource (a PNG).",
            types.BlobResourceContents(uri="test://static-binary", mime_type="image/png", blob=PNG),
        ),
        (
            "test://watched-resource",
            "watched-resource",
            "A resource to subscribe to (handshake era).",
            types.TextResourceContents(
                uri="test://watched-resource", mime_type="text/plain", text="Watched content."
            ),
        ),
    )
}
TEMPLATE = types.ResourceTemplate(
    uri_template="test://template/{id}/data",
    name="template-data",
    description="Data for an id.",
    mime_type="application/json",
)
TEMPLATE_URI = re.compile(r"test://template/(?P<id>[^/]+)/data")


async def list_resources(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[resource for resource, _ in RESOURCES.values()])


async def list_resource_templates(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=[TEMPLATE])


async def read_resource(
    ctx: Ctx, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    """A URI that names nothing is -32602 with the URI in ``data`` (SEP-2164), never an empty
    ``contents``."""
    if params.uri in RESOURCES:
        return types.ReadResourceResult(contents=[RESOURCES[params.uri][1]])
    if match := TEMPLATE_URI.fullmatch(params.uri):
        key = match["id"]
        data = json.dumps({"id": key, "templateTest": True, "data": f"Data for ID: {key}"})
        contents = types.TextResourceContents(
            uri=params.uri, mime_type="application/json", text=data
        )
        return types.ReadResourceResult(contents=[contents])
    raise MCPError(types.INVALID_PARAMS, "Resource not found", {"uri": params.uri})


async def subscription(
    ctx: Ctx, params: types.SubscribeRequestParams | types.UnsubscribeRequestParams
) -> types.EmptyResult:
    """Accepted: the fixtures never change, so there is never an update to send."""
    return types.EmptyResult()


# --- completion ----------------------------------------------------------------------------------

COMPLETIONS: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("ref/prompt", "test_prompt_with_arguments", "arg1"): ("paris", "park", "party", "test"),
    ("ref/prompt", "test_prompt_with_arguments", "arg2"): ("world", "wonder"),
    ("ref/resource", TEMPLATE.uri_template, "id"): ("1", "2", "3", "123"),
}


async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    ref = params.ref
    target = ref.name if isinstance(ref, types.PromptReference) else ref.uri
    values = COMPLETIONS.get((ref.type, target, params.argument.name), ())
    found = [v for v in values if v.startswith(params.argument.value)]
    return types.CompleteResult(
        completion=types.Completion(values=found, total=len(found), has_more=False)
    )


Handler = Callable[[Ctx, Any], Awaitable[HandlerResult]]
# What ``install`` registers, method by method.
HANDLERS: tuple[tuple[str, type[types.RequestParams], Handler], ...] = (
    ("prompts/list", types.PaginatedRequestParams, list_prompts),
    ("prompts/get", types.GetPromptRequestParams, get_prompt),
    ("resources/list", types.PaginatedRequestParams, list_resources),
    ("resources/templates/list", types.PaginatedRequestParams, list_resource_templates),
    ("resources/read", types.ReadResourceRequestParams, read_resource),
    ("resources/subscribe", types.SubscribeRequestParams, subscription),
    ("resources/unsubscribe", types.UnsubscribeRequestParams, subscription),
    ("completion/complete", types.CompleteRequestParams, complete),
)
