"""The MCP conformance suite's fixtures (tools, prompts, resources, completions), served by /mcp
only under the conformance profile (``MCP_CONFORMANCE_FIXTURES``, which ``.ci/mcp-conformance``
sets and production refuses). None of it is governed: these are the suite's test doubles, not
the product's tools."""

from __future__ import annotations

from typing import Any


def install(server: Any) -> None:
    """Add the fixtures to ``server`` (a ``mcp.server.lowlevel.Server``)."""
