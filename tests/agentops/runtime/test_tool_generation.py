"""The tool generation an approval binds (seed 002's adapter generation) is the same in every
process of one release (a worker may verify what another one bound, whatever its hash seed),
and changes with the tool's handler, adapters, schemas or metadata."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

from agentops.contract import ToolMeta
from agentops.runtime import registry
from agentops.runtime.approval import tool_generation

SCRIPT = (
    "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings'; django.setup();"
    "from agentops.runtime import registry; from agentops.runtime.approval import tool_generation;"
    "print(','.join(tool_generation(s) for s in registry.all_tools()))"
)


def test_the_generation_is_the_same_in_every_process():
    def generations(seed: str) -> str:
        env = os.environ | {"PYTHONHASHSEED": seed}
        return subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()

    here = ",".join(tool_generation(s) for s in registry.all_tools())
    assert generations("1") == generations("2") == here


def test_the_generation_changes_with_what_the_tool_is():
    spec = registry.get("reserve_room")
    other_handler = dataclasses.replace(spec, handler=lambda ctx, args: {})
    other_meta = dataclasses.replace(
        spec, meta=ToolMeta(**{**dataclasses.asdict(spec.meta), "estimated_latency_ms": 999})
    )
    other_verify = dataclasses.replace(spec, verify=registry.get("cancel_booking").verify)

    generations = {tool_generation(s) for s in (spec, other_handler, other_meta, other_verify)}
    assert len(generations) == 4


def test_a_changed_handler_behind_the_same_wrapper_is_another_generation():
    """The booking handlers are wrapped (functools.wraps) by one error-mapping decorator: the
    generation must see the function inside, not only the wrapper, whatever its name."""
    import functools

    spec = registry.get("reserve_room")

    def wrap(fn):
        @functools.wraps(fn)
        def wrapper(ctx, args):
            return fn(ctx, args)

        return wrapper

    def handler(ctx, args):
        return {"one": 1}

    first = wrap(handler)

    def handler(ctx, args):
        return {"two": 2}

    second = wrap(handler)
    assert first.__qualname__ == second.__qualname__
    assert tool_generation(dataclasses.replace(spec, handler=first)) != tool_generation(
        dataclasses.replace(spec, handler=second)
    )
