"""The run state machine: start, step (model -> gate -> actions), advance, finish.

Executing an action is in actions.py; reconciliation and the sweeper in reconcile.py. Each
function takes ids, locks what it changes, and is safe to call twice (Celery delivers at least
once)."""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from accounts.selectors import user_roles
from agentops import gate, registry
from agentops.contract import (
    CallContext,
    SideEffect,
    canonical_json,
)
from agentops.models import (
    Action,
    ActionStatus,
    AgentRun,
    RunStatus,
)
from agentops.planners.base import ModelContext, Observation, Step
from agentops.queueing import enqueue_action, enqueue_reconcile, enqueue_step
from agentops.trace import trace_append

log = logging.getLogger(__name__)

POLICY_VERSION = "2026-11-29.1"
DEFAULT_BUDGETS = {"max_turns": 8, "max_proposals": 12, "max_tool_calls": 12, "deadline_s": 180}
BOOKING_TOOLS = ["find_available_rooms", "reserve_room", "get_booking", "list_my_bookings"]
READ_TOOLS = ["find_available_rooms", "get_booking", "list_my_bookings"]


class DelegationScope(BaseModel):
    """A scope given explicitly when a run is started (API or tests); validated as JSON."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tools: list[str] | None = None
    window: tuple[AwareDatetime, AwareDatetime] | None = None
    attendees: int | None = Field(default=None, ge=1, le=500)
    equipment: list[str] = Field(default_factory=list)
    room: str | None = None
    max_writes: int = Field(default=0, ge=0, le=5)

    @model_validator(mode="after")
    def _window_in_order(self) -> DelegationScope:
        if self.window is not None and self.window[1] <= self.window[0]:
            raise ValueError("scope window must end after it starts")
        return self


def delegation_from_request(text: str) -> tuple[dict[str, Any], str]:
    """The host's reading of the user's request: what this run may do. Never the model's."""
    from agentops.planners.parsing import BookingRequest, parse_booking_request

    parsed = parse_booking_request(text, now=timezone.now(), tz=ZoneInfo(settings.TIME_ZONE))
    if isinstance(parsed, BookingRequest):
        return {
            "tools": BOOKING_TOOLS,
            "window": [parsed.start_at.isoformat(), parsed.end_at.isoformat()],
            "attendees": parsed.attendees,
            "equipment": list(parsed.equipment),
            "room": parsed.room_code,
            "max_writes": 1,
        }, parsed.language
    return {"tools": READ_TOOLS, "max_writes": 0}, parsed.language


# --- start ------------------------------------------------------------------------------------


def run_start(
    *,
    user: Any,
    request_text: str,
    scope: dict[str, Any] | None = None,
    model: str | None = None,
    faults: list[dict[str, Any]] | None = None,
    script: list[dict[str, Any]] | None = None,
    budgets: dict[str, Any] | None = None,
) -> AgentRun:
    """Create a run for ``user`` (from the session or token) and enqueue its first step."""
    text = (request_text or "").strip()
    if not text or len(text) > 2000:
        raise ValueError("request must be 1-2000 characters")
    delegation, language = delegation_from_request(text)
    if scope is not None:
        try:
            delegation = DelegationScope.model_validate_json(canonical_json(scope)).model_dump(
                mode="json"
            )
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'scope'}: {e['msg']}" for e in exc.errors()[:5]
            )
            raise ValueError(f"invalid scope: {problems}") from None
    merged_budgets = DEFAULT_BUDGETS | (budgets or {})
    with transaction.atomic():
        run = AgentRun.objects.create(
            subject=user,
            goal=text,
            language=language,
            model_name=model or settings.AGENT_MODEL,
            delegation=delegation,
            budgets=merged_budgets,
            policy_version=POLICY_VERSION,
            faults=faults or [],
            model_script=script or [],
            deadline=timezone.now() + timedelta(seconds=merged_budgets["deadline_s"]),
        )
        trace_append(
            run=run,
            kind="run_started",
            payload={
                "subject": getattr(user, "employee_id", "") or user.pk,
                "model": run.model_name,
                "delegation": delegation,
                "budgets": merged_budgets,
                "policy_version": POLICY_VERSION,
            },
        )
        enqueue_step(run.pk, 1)
    return run


def run_cancel(*, run_id: Any, user: Any) -> AgentRun:
    with transaction.atomic():
        run = AgentRun.objects.select_for_update().get(pk=run_id, subject=user)
        if not run.is_terminal:
            run.actions.filter(
                status__in=[ActionStatus.QUEUED, ActionStatus.WAITING_APPROVAL]
            ).update(status=ActionStatus.CANCELLED)
            _finish(run, RunStatus.CANCELLED, "cancelled_by_user", "Cancelled.")
    return run


# --- one step: model -> gate -> actions -------------------------------------------------------


def _lock_run(run_id: Any) -> AgentRun:
    """The run row, locked until the caller's transaction ends, with its subject loaded."""
    return AgentRun.objects.select_for_update(of=("self",)).select_related("subject").get(pk=run_id)


def run_step(run_id: Any, turn: int) -> None:
    """Plan turn ``turn`` of the run. A duplicate delivery of the same turn does nothing."""
    with transaction.atomic():
        run = _lock_run(run_id)
        if (
            run.status != RunStatus.RUNNING
            or run.actions.filter(status__in=[ActionStatus.QUEUED, ActionStatus.RUNNING]).exists()
        ):
            return
        resuming = run.turn == turn and not run.actions.filter(turn=turn).exists()
        if run.turn != turn - 1 and not resuming:
            return
        now = timezone.now()
        if turn > run.budgets.get("max_turns", 8) or now >= run.deadline:
            trace_append(
                run=run, kind="budget_exhausted", payload={"turn": turn, "budget": "turns/deadline"}
            )
            _finish_unverified(run, "budget_exhausted")
            return
        run.turn = turn
        run.save(update_fields=["turn", "updated_at"])
    ctx = build_context(run)
    try:
        step = get_planner(run).propose(ctx)
    except Exception as exc:
        log.exception("planner failed for run %s", run.pk)
        with transaction.atomic():
            run = AgentRun.objects.select_for_update().get(pk=run_id)
            if run.status == RunStatus.RUNNING:
                trace_append(
                    run=run, kind="model_error", payload={"turn": turn, "error": type(exc).__name__}
                )
                _finish_unverified(run, "model_unavailable")
        return
    _apply_step(run_id, turn, step)


def _apply_step(run_id: Any, turn: int, step: Step) -> None:
    with transaction.atomic():
        run = _lock_run(run_id)
        if (
            run.status != RunStatus.RUNNING
            or run.turn != turn
            or run.actions.filter(turn=turn).exists()
        ):
            return
        trace_append(
            run=run,
            kind="model_step",
            payload={
                "turn": turn,
                "proposals": [{"tool": p.tool, "arguments": p.arguments} for p in step.proposals],
                "message": step.message[:500],
                "outcome": step.outcome if not step.proposals else "",
            },
        )
        if not step.proposals:
            _finish_with_verification(run, step)
            return
        user = run.subject
        roles = user_roles(user=user)
        # A refused or failed write wrote nothing (red/yellow): it does not use up the allowance.
        writes_so_far = (
            run.actions.filter(readonly=False)
            .exclude(
                status__in=[ActionStatus.REJECTED, ActionStatus.CANCELLED, ActionStatus.FAILED]
            )
            .count()
        )
        waiting = False
        for index, proposal in enumerate(step.proposals):
            run.proposals += 1
            verdict, action = _gate_one(
                run, user, roles, turn, index, proposal.tool, proposal.arguments, writes_so_far
            )
            if (
                action.status in (ActionStatus.QUEUED, ActionStatus.WAITING_APPROVAL)
                and not action.readonly
            ):
                writes_so_far += 1
            waiting = waiting or action.status == ActionStatus.WAITING_APPROVAL
            if verdict.decision == "abort":
                run.save(update_fields=["proposals", "updated_at"])
                _finish_unverified(run, verdict.error.reason)
                return
        if waiting:
            run.status = RunStatus.WAITING_APPROVAL
            trace_append(run=run, kind="run_waiting_approval", payload={"turn": turn})
        run.save(update_fields=["proposals", "status", "updated_at"])
        if not waiting:
            transaction.on_commit(lambda: advance(run_id, turn))


def _gate_one(
    run: AgentRun,
    user: Any,
    roles: set[str],
    turn: int,
    index: int,
    tool: str,
    arguments: Any,
    writes_so_far: int,
) -> tuple[gate.Verdict, Action]:
    """Run the gate on one proposal and record it as an Action (refused ones too)."""
    raw = arguments if isinstance(arguments, dict) else {"_arguments": arguments}
    digest = hashlib.sha256(canonical_json({"tool": tool, "params": raw}).encode()).hexdigest()
    spec, args, verdict = gate.screen(
        tool,
        arguments,
        roles=roles,
        user_id=user.pk,
        scope=lambda spec, args: gate.check_scope(spec, args, run.delegation, writes_so_far),
        after_rate=(
            lambda: gate.check_budget(
                run.budgets,
                proposals=run.proposals,
                tool_calls=run.tool_calls,
                deadline=run.deadline,
                now=timezone.now(),
            ),
            lambda: gate.check_loop(run.actions.filter(tool=tool, params_digest=digest).count()),
        ),
    )
    params = args.model_dump(mode="json") if args is not None else raw
    action = Action(
        run=run,
        turn=turn,
        call_index=index,
        tool=tool,
        params=params,
        params_digest=digest,
        readonly=spec.meta.readonly if spec else True,
        observed_version=params.get("expected_version"),
    )
    if verdict is None:
        ctx = CallContext(user=user, run_id=str(run.pk), delegation=run.delegation)
        level, reasons = gate.assess_risk(spec, ctx, args)
        action.risk, action.risk_reasons = level.value, list(reasons)
        decision = "approval" if level == SideEffect.HIGH else "execute"
        verdict = gate.Verdict(
            decision,
            spec=spec,
            args=args,
            params=params,
            risk=level,
            risk_reasons=reasons,
            check="policy",
        )
    if verdict.decision in ("execute", "approval"):
        if not spec.meta.readonly and spec.meta.enforced_idempotent:
            action.idempotency_key = f"{run.pk}:{turn}:{index}"
        action.status = (
            ActionStatus.QUEUED if verdict.decision == "execute" else ActionStatus.WAITING_APPROVAL
        )
        action.proposal_deadline = run.deadline
    else:
        action.status = ActionStatus.REJECTED
        action.result = verdict.error.envelope()
    action.save()
    trace_append(
        run=run,
        kind="gate",
        action=action,
        payload={
            "tool": tool,
            "call_index": index,
            "decision": verdict.decision,
            "check": verdict.check,
            "risk": action.risk,
            "risk_reasons": action.risk_reasons,
            "idempotency_key": action.idempotency_key,
            **({"refusal": action.result} if action.result else {}),
        },
    )
    return verdict, action


def advance(run_id: Any, turn: int) -> None:
    """After a turn's actions change: start the next write, or the next step when all are done."""
    with transaction.atomic():
        run = AgentRun.objects.select_for_update().get(pk=run_id)
        if run.status != RunStatus.RUNNING:
            return
        actions = list(run.actions.filter(turn=turn))
        if any(a.status == ActionStatus.RUNNING for a in actions):
            return
        queued = [a for a in actions if a.status == ActionStatus.QUEUED]
        reads = [a for a in queued if a.readonly]
        to_start = reads or queued[:1]  # reads in parallel; writes one at a time
        if queued:
            fresh = [a for a in to_start if not a.task_id]
            for a in fresh:
                a.task_id = "enqueued"
                a.save(update_fields=["task_id"])
                enqueue_action(a.pk)
            return
        enqueue_step(run_id, turn + 1)


def action_context(run: AgentRun, action: Action) -> CallContext:
    """Who and what a call of this action runs as: the run's subject, never the model's say."""
    return CallContext(
        user=run.subject,
        run_id=str(run.pk),
        action_id=str(action.pk),
        idempotency_key=action.idempotency_key,
        delegation=run.delegation,
    )


def run_enter_reconciling(run: AgentRun, action: Action, *, kind: str, payload: dict) -> None:
    """The action's outcome is unknown: no new write in this run until it is settled."""
    if run.status == RunStatus.RUNNING:
        run.status = RunStatus.RECONCILING
        run.save(update_fields=["status", "updated_at"])
    trace_append(run=run, kind=kind, action=action, payload=payload)
    enqueue_reconcile(action.pk)


def run_resume_if_clear(run: AgentRun, turn: int) -> None:
    if run.actions.filter(
        status__in=[ActionStatus.UNKNOWN_OUTCOME, ActionStatus.NEEDS_HUMAN]
    ).exists():
        return
    if run.model_name == "direct":  # a single API call: no model to continue with
        _finish(run, RunStatus.SUCCEEDED, "reconciled", "")
        return
    if run.status == RunStatus.RECONCILING:
        run.status = RunStatus.RUNNING
        run.save(update_fields=["status", "updated_at"])
        trace_append(run=run, kind="run_resumed", payload={"turn": turn})
    transaction.on_commit(lambda: advance(run.pk, turn))


def still_checking_reply(language: str) -> str:
    if language == "zh":
        return "正在核对预约状态：写入结果暂时无法确认，尚未重复预订。确认后会更新。"
    return "Still checking whether the booking went through; nothing has been booked twice. This page will update."


# --- finishing: the verifier decides, not the model ---------------------------------------------


def _finish_with_verification(run: AgentRun, step: Step) -> None:
    pending = run.actions.filter(
        status__in=[ActionStatus.UNKNOWN_OUTCOME, ActionStatus.NEEDS_HUMAN]
    )
    if pending.exists():
        run.status, run.reply = RunStatus.RECONCILING, still_checking_reply(run.language)
        run.save(update_fields=["status", "reply", "updated_at"])
        return
    writes = list(
        run.actions.filter(readonly=False, status=ActionStatus.SUCCEEDED).order_by(
            "turn", "call_index"
        )
    )
    summaries, problems = [], []
    for action in writes:
        spec = registry.get(action.tool)
        receipt = action.result.get("data") or {}
        verdict = spec.verify(receipt, action_context(run, action))
        trace_append(
            run=run,
            kind="verified",
            action=action,
            payload={"holds": verdict.holds, "detail": verdict.detail},
        )
        if verdict.holds:
            summaries.append(
                spec.summarize(receipt, run.language) if spec.summarize else verdict.detail
            )
        else:
            problems.append(verdict.detail)
    wanted_write = int(run.delegation.get("max_writes", 0)) > 0
    if problems:
        _finish(
            run,
            RunStatus.FAILED,
            "verification_failed",
            _nothing_booked(run.language, step.message),
        )
    elif summaries:
        _finish(run, RunStatus.SUCCEEDED, "verified", " ".join(summaries))
    elif step.outcome == "done" and not wanted_write:
        _finish(run, RunStatus.SUCCEEDED, "answered", step.message)
    else:
        _finish(
            run,
            RunStatus.FAILED,
            step.outcome or "not_done",
            _nothing_booked(run.language, step.message),
        )


def _finish_unverified(run: AgentRun, outcome: str) -> None:
    """End early (budget, loop, model down): only verified receipts may be reported; calls
    that have not started never will."""
    run.actions.filter(status__in=[ActionStatus.QUEUED, ActionStatus.WAITING_APPROVAL]).update(
        status=ActionStatus.CANCELLED
    )
    _finish(
        run,
        RunStatus.FAILED,
        outcome,
        _nothing_booked(run.language, _stop_reason(run.language, outcome)),
    )


def _stop_reason(language: str, outcome: str) -> str:
    if language == "zh":
        return f"本次请求已停止（{outcome}）。"
    return f"The request was stopped ({outcome.replace('_', ' ')})."


def _nothing_booked(language: str, message: str) -> str:
    prefix = "未完成预订。" if language == "zh" else "Nothing was booked."
    return f"{prefix} {message}".strip()


def _finish(run: AgentRun, status: str, outcome: str, reply: str) -> None:
    run.status, run.outcome, run.reply = status, outcome, reply[:2000]
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "outcome", "reply", "finished_at", "updated_at"])
    trace_append(
        run=run,
        kind="run_finished",
        payload={"status": status, "outcome": outcome, "reply": run.reply},
    )


# --- context and planners ---------------------------------------------------------------------


def build_context(run: AgentRun) -> ModelContext:
    user = run.subject
    allowed = run.delegation.get("tools")
    tools = [
        registry.openai_function(s)
        for s in registry.visible_to(user)
        if allowed is None or s.name in allowed
    ]
    history = [
        Observation(turn=a.turn, tool=a.tool, arguments=a.params, result=a.result)
        for a in run.actions.filter(result__isnull=False).order_by("turn", "call_index")
    ]
    return ModelContext(
        goal=run.goal,
        language=run.language,
        now=timezone.localtime().isoformat(),
        subject={
            "employee_id": getattr(user, "employee_id", "") or "",
            "department": getattr(user, "department", ""),
        },
        delegation=run.delegation,
        tools=tools,
        history=history,
        turn=run.turn,
    )


def get_planner(run: AgentRun):
    if run.model_name == "scripted":
        from agentops.planners.scripted import ScriptedPlanner

        return ScriptedPlanner(run.model_script)
    if run.model_name == "openai":
        from agentops.planners.openai_adapter import from_settings

        return from_settings()
    from agentops.planners.rules import RulesPlanner

    return RulesPlanner()
