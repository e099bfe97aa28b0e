"""The gate: every proposed call passes these checks, in this order, before anything executes:
rate limit (every call counts, refused ones too), unknown tool, schema, visibility to the
subject's roles, the delegation's scope, the run's budget, loop detection, then policy risk
(a HIGH call: the tool's own rules, and its requester's bound of approval requests).

Each refusal is an envelope with a hint and has no side effect on the environment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ValidationError

from agentops.contract import (
    CallContext,
    Delegation,
    Message,
    Reason,
    SideEffect,
    ToolError,
    ToolSpec,
    canonical_json,
    message_text,
)
from agentops.contract.limits import safe_text
from agentops.runtime import ratelimit, registry
from agentops.runtime.timing import LOOP_LIMIT, Budgets
from approvals import services as approvals


class GateDecision(StrEnum):
    EXECUTE = "execute"
    APPROVAL = "approval"  # HIGH risk: waits for a human
    REFUSE = "refuse"  # the run goes on; the model sees the refusal
    ABORT = "abort"  # the run ends failed (budget, loop)


class GateCheck(StrEnum):
    RATE_LIMIT = "rate_limit"
    UNKNOWN_TOOL = "unknown_tool"
    SCHEMA = "schema"
    VISIBILITY = "visibility"
    SCOPE = "scope"
    BUDGET = "budget"
    LOOP = "loop"
    POLICY = "policy"


@dataclass(frozen=True)
class Verdict:
    decision: GateDecision
    check: GateCheck
    spec: ToolSpec | None = None
    args: BaseModel | None = None
    risk: SideEffect | None = None
    risk_reasons: tuple[Message | str, ...] = ()
    error: ToolError | None = None


@dataclass(frozen=True)
class RunUsage:
    """What a run has used so far, for the budget and loop checks."""

    budgets: Budgets
    proposals: int  # this proposal included
    tool_calls: int
    past_deadline: bool
    same_calls_before: Callable[[], int]  # how often this exact call was proposed before


def _refuse(
    check: GateCheck,
    reason: Reason,
    code: str,
    message: str,
    hint: str,
    retry_after_ms: int | None = None,
    *,
    abort: bool = False,
) -> Verdict:
    return Verdict(
        GateDecision.ABORT if abort else GateDecision.REFUSE,
        check,
        error=ToolError(reason, code, message, hint, retry_after_ms),
    )


def check_rate(user_id: int) -> Verdict | None:
    try:
        retry_after_ms = ratelimit.tool_calls.hit(user_id)
    except ratelimit.LimiterUnavailableError as exc:
        return _refuse(
            GateCheck.RATE_LIMIT,
            Reason.UNAVAILABLE,
            "rate_limiter_unavailable",
            "The rate limiter did not answer, so the call was not counted and not made.",
            "Try again shortly.",
            exc.retry_after_ms,
        )
    if retry_after_ms is None:
        return None
    return _refuse(
        GateCheck.RATE_LIMIT,
        Reason.RATE_LIMITED,
        "rate_limited",
        f"More than {ratelimit.tool_calls.limit} tool calls this minute.",
        "Wait before calling again.",
        retry_after_ms,
    )


def check_tool(name: str, roles: frozenset[str]) -> ToolSpec | Verdict:
    spec = registry.get(name)
    if spec is not None:
        return spec
    visible = ", ".join(s.name for s in registry.all_tools() if s.meta.roles & roles)
    return _refuse(
        GateCheck.UNKNOWN_TOOL,
        Reason.UNKNOWN_TOOL,
        "unknown_tool",
        f"There is no tool {safe_text(name, 64)!r}.",
        f"Use one of: {visible}.",
    )


def check_schema(spec: ToolSpec, arguments: Any) -> BaseModel | Verdict:
    if not isinstance(arguments, dict):
        return _refuse(
            GateCheck.SCHEMA,
            Reason.INVALID_INPUT,
            "arguments_not_object",
            "Arguments must be a JSON object.",
            "Send the parameters as an object.",
        )
    smuggled = sorted(safe_text(k) for k in arguments if "approv" in str(k).lower())
    if smuggled:
        return _refuse(
            GateCheck.SCHEMA,
            Reason.INVALID_INPUT,
            "approval_field_refused",
            f"Field(s) {', '.join(smuggled)} are not accepted: approvals never come through tool arguments.",
            "Propose the call without it; a human approves through the approvals inbox.",
        )
    try:
        args = spec.input_model.model_validate_json(canonical_json(arguments))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(safe_text(p) for p in e['loc']) or '(root)'}: {safe_text(e['msg'], 200)}"
            for e in exc.errors()[:5]
        )
        return _refuse(
            GateCheck.SCHEMA,
            Reason.INVALID_INPUT,
            "schema_violation",
            f"Invalid arguments: {problems}."[:1000],
            "Fix the listed fields; see the tool's input schema.",
        )
    return args


def check_visible(spec: ToolSpec, roles: frozenset[str]) -> Verdict | None:
    if spec.meta.roles & roles:
        return None
    return _refuse(
        GateCheck.VISIBILITY,
        Reason.FORBIDDEN,
        "tool_not_visible",
        f"{spec.name} is not available to you.",
        "Use a tool from your tool list.",
    )


def _out_of_scope(code: str, message: str, hint: str) -> Verdict:
    return _refuse(GateCheck.SCOPE, Reason.OUT_OF_SCOPE, code, message, hint)


def check_scope(
    spec: ToolSpec, args: BaseModel, delegation: Delegation, writes_so_far: int
) -> Verdict | None:
    """The run's delegation, set by the host from the user's request. Every field is enforced
    on the arguments the tool declares it constrains (ToolSpec.scope)."""
    if spec.name not in delegation.tools:
        return _out_of_scope(
            "tool_not_delegated",
            f"This request does not allow {spec.name}.",
            "Stay within what the user asked for.",
        )
    if spec.meta.readonly:
        return None
    if writes_so_far >= delegation.max_writes:
        return _out_of_scope(
            "max_writes", "This request allows no further writes.", "Report the outcome."
        )
    fields = spec.scope
    if fields.window and delegation.window:
        start, end = (getattr(args, name, None) for name in fields.window)
        lo, hi = delegation.window
        if start is not None and end is not None and (start < lo or end > hi):
            return _out_of_scope(
                "outside_window",
                f"The user asked for {lo.isoformat()} to {hi.isoformat()}.",
                "Use the time the user asked for.",
            )
    if fields.attendees and delegation.attendees:
        attendees = getattr(args, fields.attendees, None)
        if attendees is not None and attendees != delegation.attendees:
            return _out_of_scope(
                "attendees_differ",
                f"The user asked for {delegation.attendees} people.",
                "Use the number of people the user gave.",
            )
    if fields.equipment and delegation.equipment:
        equipment = getattr(args, fields.equipment, None)
        if equipment is not None and not delegation.equipment <= set(equipment):
            return _out_of_scope(
                "equipment_missing",
                f"The user needs {', '.join(sorted(delegation.equipment))}.",
                "Include the equipment the user asked for.",
            )
    allowed = delegation.allowed_resources
    if fields.resource and allowed:
        resource = getattr(args, fields.resource, None)
        if resource not in allowed:
            named = ", ".join(sorted(allowed))
            return _out_of_scope(
                "resource_differs",
                f"The user asked for {named}, not {resource}.",
                f"Use {named}, or tell the user it is not available.",
            )
    return None


def check_budget(usage: RunUsage) -> Verdict | None:
    budgets = usage.budgets
    exhausted = (
        ("proposals", "The proposal budget is used up.")
        if usage.proposals > budgets.max_proposals
        else ("tool_calls", "The tool call budget is used up.")
        if usage.tool_calls >= budgets.max_tool_calls
        else ("deadline", "The run's deadline has passed.")
        if usage.past_deadline
        else None
    )
    if exhausted is None:
        return None
    code, message = exhausted
    return _refuse(
        GateCheck.BUDGET,
        Reason.BUDGET_EXHAUSTED,
        code,
        message,
        "Stop and report to the user.",
        abort=True,
    )


def check_loop(same_calls_before: int) -> Verdict | None:
    if same_calls_before + 1 < LOOP_LIMIT:
        return None
    return _refuse(
        GateCheck.LOOP,
        Reason.LOOP_DETECTED,
        "loop_detected",
        f"The same call was proposed {LOOP_LIMIT} times.",
        "Stop repeating it.",
        abort=True,
    )


def assess_risk(
    spec: ToolSpec, ctx: CallContext, args: BaseModel
) -> tuple[SideEffect, tuple[Message | str, ...]]:
    """Static metadata, raised (never lowered) by the tool's own rules."""
    level = spec.meta.side_effect
    reasons: tuple[Message | str, ...] = ()
    if spec.assess_risk is not None:
        assessed = spec.assess_risk(ctx, args)
        if assessed.level.rank > level.rank:
            level = assessed.level
        reasons = assessed.reasons
    return level, reasons


def screen(
    name: str,
    arguments: Any,
    *,
    ctx: CallContext,
    roles: frozenset[str],
    writes_so_far: int,
    usage: RunUsage | None = None,
) -> Verdict:
    """Run the checks in their fixed order; the first refusal decides. ``ctx`` carries the
    subject (from the session or token) and the delegation."""
    verdict = check_rate(ctx.user.pk)
    if verdict is not None:
        return verdict
    spec = check_tool(name, roles)
    if isinstance(spec, Verdict):
        return spec
    args = check_schema(spec, arguments)
    if isinstance(args, Verdict):
        return Verdict(args.decision, args.check, spec, None, error=args.error)
    verdict = check_visible(spec, roles) or check_scope(spec, args, ctx.delegation, writes_so_far)
    if verdict is None and usage is not None:
        verdict = check_budget(usage) or check_loop(usage.same_calls_before())
    if verdict is not None:
        return Verdict(verdict.decision, verdict.check, spec, args, error=verdict.error)
    level, reasons = assess_risk(spec, ctx, args)
    if level == SideEffect.HIGH:
        invalid = check_valid(spec, ctx, args)
        if invalid is not None:  # refused as its input is: its action keeps a digest only
            return Verdict(invalid.decision, invalid.check, spec, None, error=invalid.error)
        refused = check_approvals_bound(ctx.user.pk)
        if refused is not None:
            return Verdict(refused.decision, refused.check, spec, args, error=refused.error)
    decision = GateDecision.APPROVAL if level == SideEffect.HIGH else GateDecision.EXECUTE
    return Verdict(decision, GateCheck.POLICY, spec, args, level, reasons)


def check_valid(spec: ToolSpec, ctx: CallContext, args: BaseModel) -> Verdict | None:
    """The tool's own rules (``ToolSpec.validate``), before a human is asked to approve: a
    call the tool would refuse whatever the approver says is refused now, in its own words."""
    if spec.validate is None:
        return None
    try:
        spec.validate(ctx, args)
    except ToolError as exc:
        return Verdict(GateDecision.REFUSE, GateCheck.SCHEMA, error=exc)
    return None


def check_approvals_bound(user_id: int) -> Verdict | None:
    """A HIGH call would open an approval request: not when its requester already has too
    many waiting, or opened too many this hour (approvals.services.approval_request_bound,
    which holds the requester's lock until the caller's transaction ends). Refused before
    anything is recorded, requested or mailed, in the reader's words (``detail``)."""
    bound = approvals.approval_request_bound(requester_id=user_id)
    if bound is None:
        return None
    error = ToolError(
        Reason.RATE_LIMITED,
        bound.code,
        bound.msgid % bound.params,
        bound.hint % bound.params,
        bound.retry_after_ms,
        detail={"msgid": bound.msgid, "hint_msgid": bound.hint, "params": bound.params},
    )
    return Verdict(GateDecision.REFUSE, GateCheck.RATE_LIMIT, error=error)


def recheck(
    spec: ToolSpec,
    args: BaseModel,
    *,
    ctx: CallContext,
    roles: frozenset[str],
    writes_before: int,
    approved_risk: SideEffect,
) -> Verdict | None:
    """Right before an action executes (first try, retries, reconciliation retries): is it
    still visible to the subject, inside the delegation, and no riskier than what was allowed
    when it was proposed? None if it may run."""
    verdict = check_visible(spec, roles) or check_scope(spec, args, ctx.delegation, writes_before)
    if verdict is not None:
        return verdict
    level, reasons = assess_risk(spec, ctx, args)
    if level.rank > approved_risk.rank:
        return _refuse(
            GateCheck.POLICY,
            Reason.FORBIDDEN,
            "risk_raised",
            f"This call now needs a human approval ({'; '.join(map(message_text, reasons))}).",
            "Propose it again; a human will be asked.",
        )
    return None
