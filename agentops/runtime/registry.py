"""The tool registry, filled at start-up from each installed app's ``tools`` module: its
``TOOLS`` (tool specs) and, optionally, its ``ASSISTANT`` (how a request becomes a delegation,
the offline planner, the replies) and its ``SANDBOX`` (drills).

The runtime finds tools and the assistant only here, so it never imports a domain app.
"""

from __future__ import annotations

import importlib

from django.apps import apps

from agentops.contract import Assistant, Sandbox, ToolSpec

_TOOLS: dict[str, ToolSpec] = {}
_ASSISTANTS: list[Assistant] = []
_SANDBOXES: list[Sandbox] = []


def register(spec: ToolSpec) -> None:
    if spec.name in _TOOLS and _TOOLS[spec.name] is not spec:
        raise ValueError(f"tool {spec.name} is declared twice")
    _TOOLS[spec.name] = spec


def unregister(name: str) -> None:
    """Withdraw a tool (a gateway's third-party tool whose server went away; tests)."""
    _TOOLS.pop(name, None)


def register_assistant(assistant: Assistant) -> None:
    if assistant not in _ASSISTANTS:
        _ASSISTANTS.append(assistant)


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
        if getattr(module, "ASSISTANT", None) is not None:
            register_assistant(module.ASSISTANT)
        if getattr(module, "SANDBOX", None) is not None and module.SANDBOX not in _SANDBOXES:
            _SANDBOXES.append(module.SANDBOX)
    check_compensations()


def check_compensations() -> None:
    """Every declared compensation names a registered write tool with a receipt lookup: the
    runtime undoes writes only through such calls (runtime.saga)."""
    for spec in _TOOLS.values():
        undo = spec.compensate
        if undo is None:
            continue
        target = _TOOLS.get(undo.tool)
        if target is None or target.meta.readonly or target.lookup_receipt is None:
            raise ValueError(f"{spec.name} is compensated by {undo.tool}: not a registered write")


def get(name: str) -> ToolSpec | None:
    return _TOOLS.get(name)


def all_tools() -> list[ToolSpec]:
    return sorted(_TOOLS.values(), key=lambda s: s.name)


def assistant() -> Assistant:
    """The assistant of the installed domain app (one per deployment)."""
    if len(_ASSISTANTS) != 1:
        raise LookupError(f"expected one assistant, found {len(_ASSISTANTS)}")
    return _ASSISTANTS[0]


def visible_to(roles: frozenset[str]) -> list[ToolSpec]:
    return [s for s in all_tools() if s.meta.roles & roles]


def sandboxes() -> list[Sandbox]:
    """The drills' sandboxes of the installed domain apps (``tools.SANDBOX``)."""
    return list(_SANDBOXES)
