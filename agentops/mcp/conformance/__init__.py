"""The MCP conformance suite's fixtures (tools, prompts, resources, completions), served by /mcp
only under the conformance profile (``MCP_CONFORMANCE_FIXTURES``, which ``.ci/mcp-conformance``
sets and production refuses). None of it is governed: these are the suite's test doubles, not
the product's tools.

Names and answers are those the suite's scenarios call and check
(``@modelcontextprotocol/conformance`` 0.2.0-alpha.12; see README, "MCP conformance"). The
multi-round fixtures (2026-07-28, ``input_required``) keep their progress in the plaintext
``requestState``; the ``RequestStateBoundary`` the server installs seals it on the way out and
verifies it on the way back, so nothing here signs or checks a state itself.
"""

from __future__ import annotations

import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.context import HandlerResult
from mcp.server.lowlevel import Server

from agentops.mcp.conformance import catalogue

# Each fixture registers itself in the tables of ``_base`` where it is defined, on import.
from agentops.mcp.conformance import input_required as input_required
from agentops.mcp.conformance import tasks as tasks
from agentops.mcp.conformance import tools as tools
from agentops.mcp.conformance._base import TOOLS, Ctx, serves

# The same for every caller, so shared caches may keep them.
FIXTURE_CACHE = CacheHint(ttl_ms=60_000, scope="public")
CACHEABLE = ("prompts/list", "resources/list", "resources/templates/list", "resources/read")


def install(server: Server) -> None:
    """Add the fixtures to ``server``: tools beside the product's (a name that is not a
    fixture's goes to the product's own handler, governed as ever), and prompts, resources,
    resource templates and completion, which the product does not serve."""
    tools_list = server.get_request_handler("tools/list")
    tools_call = server.get_request_handler("tools/call")
    if tools_list is None or tools_call is None:
        raise RuntimeError("install the conformance fixtures after the product's tools")
    product_list, product_call = tools_list.handler, tools_call.handler

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams) -> types.ListToolsResult:
        listed = types.ListToolsResult.model_validate(await product_list(ctx, params))
        fixtures = [f.tool for f in TOOLS.values() if serves(f.era, ctx)]
        return listed.model_copy(update={"tools": [*listed.tools, *fixtures]})

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> HandlerResult:
        fixture = TOOLS.get(params.name)
        if fixture is None or not serves(fixture.era, ctx):
            return await product_call(ctx, params)
        return await fixture.run(ctx, params)

    server.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    for method, params_type, handler in catalogue.HANDLERS:
        server.add_request_handler(method, params_type, handler)
    for method in CACHEABLE:
        server.cache_hints.setdefault(method, FIXTURE_CACHE)
    tasks.install(server)
