"""The gate: every proposed call passes these checks, in this order, before anything executes.

Each refusal is an envelope with a hint and has no side effect on the environment.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from pydantic import BaseModel, ValidationError

from agentops import registry
from agentops.contract import (
    RISK_ORDER,
    CallContext,
    SideEffect,
    ToolError,
    ToolSpec,
    canonical_json,
)
from agentops.redis_client import get_redis

LOOP_LIMIT = 5  # the same call proposed this many times aborts the run


@dataclass
class Verdict:
    """`execute`, `approval`, `refuse` (the run goes on) or `abort` (the run ends failed)."""

    decision: str
    spec: ToolSpec | None = None
    args: BaseModel | None = None
    params: dict[str, Any] = field(default_factory=dict)
    risk: SideEffect | None = None
    risk_reasons: tuple[str, ...] = ()
    error: ToolError | None = None
    check: str = ""  # which check decided


def _refuse(
    check: str,
    reason: str,
    code: str,
    message: str,
    hint: str,
    retry_after_ms: int | None = None,
    *,
    abort: bool = False,
) -> Verdict:
    return Verdict(
        "abort" if abort else "refuse",
        error=ToolError(reason, code, message, hint, retry_after_ms),
        check=check,
    )


def check_tool(name: str, roles: set[str]) -> tuple[ToolSpec | None, Verdict | None]:
    spec = registry.get(name)
    if spec is None:
        visible = ", ".join(s.name for s in registry.all_tools() if s.meta.roles & roles)
        return None, _refuse(
            "unknown_tool",
            "unknown_tool",
            "unknown_tool",
            f"There is no tool {name!r}.",
            f"Use one of: {visible}.",
        )
    return spec, None


def check_schema(spec: ToolSpec, arguments: Any) -> tuple[BaseModel | None, Verdict | None]:
    if not isinstance(arguments, dict):
        return None, _refuse(
            "schema",
            "invalid_input",
            "arguments_not_object",
            "Arguments must be a JSON object.",
            "Send the parameters as an object.",
        )
    smuggled = sorted(k for k in arguments if "approv" in str(k).lower())
    if smuggled:
        return None, _refuse(
            "schema",
            "invalid_input",
            "approval_field_refused",
            f"Field(s) {', '.join(smuggled)} are not accepted: approvals never come through tool arguments.",
            "Propose the call without it; a human approves through the approvals inbox.",
        )
    try:
        args = spec.input_model.model_validate_json(canonical_json(arguments))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        return None, _refuse(
            "schema",
            "invalid_input",
            "schema_violation",
            f"Invalid arguments: {problems}.",
            "Fix the listed fields; see the tool's input schema.",
        )
    return args, None


def check_visible(spec: ToolSpec, roles: set[str]) -> Verdict | None:
    if spec.meta.roles & roles:
        return None
    return _refuse(
        "visibility",
        "forbidden",
        "tool_not_visible",
        f"{spec.name} is not available to you.",
        "Use a tool from your tool list.",
    )


def check_scope(
    spec: ToolSpec, args: BaseModel, delegation: dict[str, Any], writes_so_far: int
) -> Verdict | None:
    """The run's delegation, set by the host from the user's request."""
    allowed = delegation.get("tools")
    if allowed is not None and spec.name not in allowed:
        return _refuse(
            "scope",
            "out_of_scope",
            "tool_not_delegated",
            f"This request does not allow {spec.name}.",
            "Stay within what the user asked for.",
        )
    if spec.meta.readonly:
        return None
    if writes_so_far >= int(delegation.get("max_writes", 0)):
        return _refuse(
            "scope",
            "out_of_scope",
            "max_writes",
            "This request allows no further writes.",
            "Report the outcome to the user.",
        )
    window = delegation.get("window")
    start, end = getattr(args, "start_at", None), getattr(args, "end_at", None)
    if window and start is not None and end is not None:
        lo, hi = (datetime.fromisoformat(w) for w in window)
        if start < lo or end > hi:
            return _refuse(
                "scope",
                "out_of_scope",
                "outside_window",
                f"The user asked for {window[0]} to {window[1]}.",
                "Use the time the user asked for.",
            )
    wanted = delegation.get("attendees")
    attendees = getattr(args, "attendees", None)
    if wanted and attendees is not None and attendees != wanted:
        return _refuse(
            "scope",
            "out_of_scope",
            "attendees_differ",
            f"The user asked for {wanted} people.",
            "Use the number of people the user gave.",
        )
    needed = set(delegation.get("equipment") or ())
    equipment = getattr(args, "equipment", None)
    if needed and equipment is not None and not needed <= set(equipment):
        return _refuse(
            "scope",
            "out_of_scope",
            "equipment_missing",
            f"The user needs {', '.join(sorted(needed))}.",
            "Include the equipment the user asked for.",
        )
    return None


def check_rate(user_id: int) -> Verdict | None:
    """A fixed one-minute window per user in Redis."""
    window = int(time.time() // 60)
    key = f"agentops:rate:{user_id}:{window}"
    redis = get_redis()
    count = redis.incr(key)
    if count == 1:
        redis.expire(key, 120)  # the first call of a window sets its lifetime
    limit = settings.AGENT_RATE_LIMIT_PER_MINUTE
    if count > limit:
        retry = int((60 - time.time() % 60) * 1000)
        return _refuse(
            "rate_limit",
            "rate_limited",
            "rate_limited",
            f"More than {limit} tool calls this minute.",
            "Wait before calling again.",
            retry,
        )
    return None


def check_budget(
    budgets: dict[str, Any], *, proposals: int, tool_calls: int, deadline: datetime, now: datetime
) -> Verdict | None:
    if proposals > int(budgets.get("max_proposals", 12)):
        return _refuse(
            "budget",
            "budget_exhausted",
            "proposals",
            "The proposal budget is used up.",
            "Stop and report to the user.",
            abort=True,
        )
    if tool_calls >= int(budgets.get("max_tool_calls", 10)):
        return _refuse(
            "budget",
            "budget_exhausted",
            "tool_calls",
            "The tool call budget is used up.",
            "Stop and report to the user.",
            abort=True,
        )
    if now >= deadline:
        return _refuse(
            "budget",
            "budget_exhausted",
            "deadline",
            "The run's deadline has passed.",
            "Stop and report to the user.",
            abort=True,
        )
    return None


def check_loop(same_calls_before: int) -> Verdict | None:
    if same_calls_before + 1 >= LOOP_LIMIT:
        return _refuse(
            "loop",
            "loop_detected",
            "loop_detected",
            f"The same call was proposed {LOOP_LIMIT} times.",
            "Stop repeating it.",
            abort=True,
        )
    return None


def screen(
    name: str,
    arguments: Any,
    *,
    roles: set[str],
    user_id: int,
    scope: Callable[[ToolSpec, BaseModel], Verdict | None] | None = None,
    after_rate: Sequence[Callable[[], Verdict | None]] = (),
) -> tuple[ToolSpec | None, BaseModel | None, Verdict | None]:
    """Run the checks in their fixed order and stop at the first refusal: unknown tool,
    schema, visibility, the caller's scope, rate limit, then the caller's budget and loop
    checks. Returns (spec, validated arguments, refusal or None); policy risk comes after."""
    spec, verdict = check_tool(name, roles)
    args = None
    if verdict is None:
        args, verdict = check_schema(spec, arguments)
    if verdict is None:
        verdict = check_visible(spec, roles)
    if verdict is None and scope is not None:
        verdict = scope(spec, args)
    if verdict is None:
        verdict = check_rate(user_id)
    for check in after_rate:
        if verdict is not None:
            break
        verdict = check()
    return spec, args, verdict


def assess_risk(
    spec: ToolSpec, ctx: CallContext, args: BaseModel
) -> tuple[SideEffect, tuple[str, ...]]:
    """Static metadata, raised (never lowered) by the tool's own rules."""
    level, reasons = spec.meta.side_effect, ()
    if spec.assess_risk is not None:
        assessed = spec.assess_risk(ctx, args)
        if RISK_ORDER[assessed.level] > RISK_ORDER[level]:
            level = assessed.level
        reasons = assessed.reasons
    return level, reasons
