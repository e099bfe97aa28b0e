"""The tool registry, filled at start-up from each installed app's ``tools.TOOLS``.

The runtime finds tools only here, so it never imports a domain app.
"""

from __future__ import annotations

import importlib
from typing import Any

from django.apps import apps
from django.db import connection

from agentops.contract import ToolSpec

_TOOLS: dict[str, ToolSpec] = {}


def register(spec: ToolSpec) -> None:
    if spec.name in _TOOLS and _TOOLS[spec.name] is not spec:
        raise ValueError(f"tool {spec.name} is declared twice")
    _TOOLS[spec.name] = spec


def autodiscover() -> None:
    for config in apps.get_app_configs():
        try:
            module = importlib.import_module(f"{config.name}.tools")
        except ModuleNotFoundError as exc:
            if exc.name != f"{config.name}.tools":
                raise
            continue
        for spec in getattr(module, "TOOLS", ()):
            register(spec)


def get(name: str) -> ToolSpec | None:
    return _TOOLS.get(name)


def all_tools() -> list[ToolSpec]:
    return sorted(_TOOLS.values(), key=lambda s: s.name)


def user_roles(user: Any) -> set[str]:
    """The user's groups, read now (never cached: a removed role takes effect at once)."""
    through = user.groups.through._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT g.name FROM auth_group g JOIN {through} ug ON ug.group_id = g.id "  # noqa: S608
            "WHERE ug.user_id = %s",
            [user.pk],
        )
        roles = {name for (name,) in cursor.fetchall()}
    if user.is_superuser:
        roles.add("admins")
    return roles


def visible_to(user: Any) -> list[ToolSpec]:
    roles = user_roles(user)
    return [s for s in all_tools() if s.meta.roles & roles]


# --- exports ----------------------------------------------------------------------------------


# A tool's exports follow from its declaration, which never changes once registered: they are
# built once per spec. Generating the JSON Schemas took ~20 ms of CPU per GET /api/tools and
# ~1.5 ms per planning step (bench/README.md). The dicts are shared: callers must not mutate them.
_EXPORTS: dict[tuple[str, str], tuple[ToolSpec, Any]] = {}


def _cached(spec: ToolSpec, what: str, build: Any) -> Any:
    hit = _EXPORTS.get((spec.name, what))
    if hit is None or hit[0] is not spec:  # a spec re-declared under the same name (tests)
        hit = _EXPORTS[(spec.name, what)] = (spec, build())
    return hit[1]


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    return _cached(spec, "input", spec.input_model.model_json_schema)


def output_schema(spec: ToolSpec) -> dict[str, Any]:
    return _cached(
        spec, "output", lambda: spec.output_model.model_json_schema(mode="serialization")
    )


def description(spec: ToolSpec) -> str:
    return _cached(spec, "description", spec.description.render)


def metadata(spec: ToolSpec) -> dict[str, Any]:
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


def openai_function(spec: ToolSpec) -> dict[str, Any]:
    """An OpenAI function-calling tool definition."""
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": description(spec),
            "parameters": input_schema(spec),
        },
    }


def mcp_tool(spec: ToolSpec) -> dict[str, Any]:
    """An MCP tool definition; annotations are derived from the metadata, not written by hand."""
    m = spec.meta
    return {
        "name": spec.name,
        "title": spec.name.replace("_", " ").capitalize(),
        "description": description(spec),
        "inputSchema": input_schema(spec),
        "outputSchema": output_schema(spec),
        "annotations": {
            "readOnlyHint": m.readonly,
            # MCP's conservative default for any write: the client should confirm.
            "destructiveHint": not m.readonly,
            "idempotentHint": m.readonly or m.enforced_idempotent,
            "openWorldHint": False,
        },
    }


def describe(spec: ToolSpec) -> dict[str, Any]:
    """What GET /api/tools shows for one tool."""
    return {
        "name": spec.name,
        "description": description(spec),
        "input_schema": input_schema(spec),
        "output_schema": output_schema(spec),
        "metadata": metadata(spec),
    }
