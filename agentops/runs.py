"""The run state machine: start, step (model -> gate -> actions), execute, advance, reconcile,
finish. Each function takes ids, locks what it changes, and is safe to call twice (Celery
delivers at least once)."""

from __future__ import annotations

import hashlib
import logging
import random
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentops import gate, registry
from agentops.contract import (
    UNKNOWN_OUTCOME,
    CallContext,
    ReceiptStatus,
    SideEffect,
    canonical_json,
    failure,
    success,
)
from agentops.execution import faults_for, invoke
from agentops.idempotency import (
    idempotency_claim,
    idempotency_complete,
    idempotency_release,
    request_digest,
)
from agentops.models import (
    Action,
    ActionStatus,
    AgentRun,
    RunStatus,
)
from agentops.planners.base import ModelContext, Observation, Step
from agentops.trace import trace_append

log = logging.getLogger(__name__)

POLICY_VERSION = "2026-11-29.1"
DEFAULT_BUDGETS = {"max_turns": 8, "max_proposals": 12, "max_tool_calls": 12, "deadline_s": 180}
MAX_YELLOW_RETRIES = 3
MAX_RECONCILE_RETRIES = 3
LEASE_GRACE_S = 5
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
        _enqueue_step(run.pk, 1)
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


def run_step(run_id: Any, turn: int) -> None:
    """Plan turn ``turn`` of the run. A duplicate delivery of the same turn does nothing."""
    with transaction.atomic():
        run = AgentRun.objects.select_for_update().select_related("subject").get(pk=run_id)
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
        run = AgentRun.objects.select_for_update().select_related("subject").get(pk=run_id)
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
        roles = registry.user_roles(user)
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
    spec, verdict = gate.check_tool(tool, roles)
    args = None
    if verdict is None:
        args, verdict = gate.check_schema(spec, arguments)
    if verdict is None:
        verdict = gate.check_visible(spec, roles)
    if verdict is None:
        verdict = gate.check_scope(spec, args, run.delegation, writes_so_far)
    if verdict is None:
        verdict = gate.check_rate(user.pk)
    if verdict is None:
        verdict = gate.check_budget(
            run.budgets,
            proposals=run.proposals,
            tool_calls=run.tool_calls,
            deadline=run.deadline,
            now=timezone.now(),
        )
    if verdict is None:
        verdict = gate.check_loop(run.actions.filter(tool=tool, params_digest=digest).count())
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


# --- executing one action ---------------------------------------------------------------------


def action_execute(action_id: Any) -> None:
    """Execute one queued action. The pending intent (the Action row with its key) exists
    before the write starts; a duplicate delivery finds it no longer queued and does nothing."""
    with transaction.atomic():
        action = (
            Action.objects.select_for_update()
            .select_related("run", "run__subject")
            .filter(pk=action_id)
            .first()
        )
        if action is None or action.status != ActionStatus.QUEUED:
            return
        run = action.run
        if run.is_terminal:
            action.status = ActionStatus.CANCELLED
            action.save(update_fields=["status"])
            trace_append(
                run=run, kind="execution_skipped", action=action, payload={"why": "run is terminal"}
            )
            return
        spec = registry.get(action.tool)
        now = timezone.now()
        action.status, action.started_at = ActionStatus.RUNNING, now
        action.attempts += 1
        action.lease_expires_at = now + timedelta(seconds=spec.meta.timeout_s + LEASE_GRACE_S)
        action.save(update_fields=["status", "started_at", "attempts", "lease_expires_at"])
        AgentRun.objects.filter(pk=run.pk).update(tool_calls=F("tool_calls") + 1)
        trace_append(
            run=run,
            kind="execution_started",
            action=action,
            payload={
                "tool": action.tool,
                "attempt": action.attempts,
                "idempotency_key": action.idempotency_key,
            },
        )
        call_number = sum(run.actions.filter(tool=action.tool).values_list("attempts", flat=True))
    envelope, outcome = _execute_call(action, spec, run, call_number)
    _record_outcome(action.pk, action.attempts, envelope, outcome)


def _execute_call(
    action: Action, spec: Any, run: AgentRun, call_number: int
) -> tuple[dict[str, Any], str]:
    args = spec.input_model.model_validate_json(canonical_json(action.params))
    ctx = CallContext(
        user=run.subject,
        run_id=str(run.pk),
        action_id=str(action.pk),
        idempotency_key=action.idempotency_key,
        delegation=run.delegation,
    )
    faults = faults_for(run.faults, action.tool, call_number)
    if spec.meta.readonly or not action.idempotency_key:
        return invoke(spec, ctx, args, faults=faults)
    # A run never writes twice for an intent it already holds a confirmed receipt for.
    done = (
        run.actions.filter(
            tool=action.tool, params_digest=action.params_digest, status=ActionStatus.SUCCEEDED
        )
        .exclude(pk=action.pk)
        .first()
    )
    if done is not None:
        return done.result | {"deduplicated_from": str(done.pk)}, "green"
    digest = request_digest(tool=action.tool, subject_id=run.subject_id, params=action.params)
    claim = idempotency_claim(
        key=action.idempotency_key, tool=action.tool, subject_id=run.subject_id, digest=digest
    )
    if claim.state == "replay":
        return claim.response, claim.response["signal"]
    if claim.state == "reuse":
        return failure(
            "idempotency_key_reuse",
            "idempotency_key_reuse",
            "This key was used for different parameters.",
            "Propose a new call.",
        ), "red"
    if claim.state == "in_progress":
        if action.attempts > 1:
            # Our own earlier attempt holds the key and its outcome is unknown: reconcile it.
            return failure(
                UNKNOWN_OUTCOME,
                UNKNOWN_OUTCOME,
                "An earlier attempt's outcome is unknown.",
                "The host is reconciling.",
            ), UNKNOWN_OUTCOME
        return failure(
            "in_progress", "in_progress", "The same call is already running.", "Wait for it.", 500
        ), "yellow"
    envelope, outcome = invoke(spec, ctx, args, faults=faults)
    if outcome in ("green", "red"):
        idempotency_complete(key=action.idempotency_key, response=envelope)
    elif outcome == "yellow":
        idempotency_release(key=action.idempotency_key)
    return envelope, outcome


def _backoff_s(attempt: int) -> float:
    return min(2.0, 0.05 * 2**attempt) * (0.5 + random.random())  # noqa: S311  (jitter, not crypto)


def _record_outcome(action_id: Any, attempt: int, envelope: dict[str, Any], outcome: str) -> None:
    with transaction.atomic():
        action = Action.objects.select_for_update().select_related("run").get(pk=action_id)
        if action.status != ActionStatus.RUNNING or action.attempts != attempt:
            return  # the sweeper took this attempt over
        run = AgentRun.objects.select_for_update().get(pk=action.run_id)
        now = timezone.now()
        action.finished_at, action.result = now, envelope
        action.duration_ms = int((now - action.started_at).total_seconds() * 1000)
        action.lease_expires_at = None
        retry = (
            outcome == "yellow" and action.attempts <= MAX_YELLOW_RETRIES and not run.is_terminal
        )
        if outcome == "green":
            action.status = ActionStatus.SUCCEEDED
        elif outcome == UNKNOWN_OUTCOME:
            action.status = ActionStatus.UNKNOWN_OUTCOME
        elif retry:
            action.status = ActionStatus.QUEUED
        else:
            action.status = ActionStatus.FAILED
        action.save()
        trace_append(
            run=run,
            kind="execution_finished",
            action=action,
            payload={
                "tool": action.tool,
                "attempt": action.attempts,
                "outcome": outcome,
                "duration_ms": action.duration_ms,
                "result": envelope,
            },
        )
        if retry:
            delay = _backoff_s(action.attempts)
            trace_append(
                run=run,
                kind="retry_scheduled",
                action=action,
                payload={"attempt": action.attempts + 1, "delay_ms": int(delay * 1000)},
            )
            transaction.on_commit(lambda: _enqueue_action(action.pk, countdown=delay))
            return
        if outcome == UNKNOWN_OUTCOME:
            if run.status in (RunStatus.RUNNING, RunStatus.RECONCILING):
                run.status = RunStatus.RECONCILING
                run.save(update_fields=["status", "updated_at"])
                trace_append(
                    run=run,
                    kind="run_reconciling",
                    action=action,
                    payload={"key": action.idempotency_key},
                )
            transaction.on_commit(lambda: _enqueue_reconcile(action.pk))
            return
        if run.status == RunStatus.RECONCILING:  # a reconciliation retry has now ended
            _resume_if_clear(run, action.turn)
            return
        turn = action.turn
    advance(action.run_id, turn)


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
                transaction.on_commit(lambda pk=a.pk: _enqueue_action(pk))
            return
        transaction.on_commit(lambda: _enqueue_step(run_id, turn + 1))


# --- reconciliation ---------------------------------------------------------------------------


def action_reconcile(action_id: Any) -> None:
    """Ask the tool what happened under the action's key: found -> take the receipt; proven
    absent -> run it again with the same key; unclear -> a human decides."""
    action = Action.objects.select_related("run").get(pk=action_id)
    if action.status != ActionStatus.UNKNOWN_OUTCOME:
        return
    spec = registry.get(action.tool)
    lookup = spec.lookup_receipt(action.idempotency_key)
    with transaction.atomic():
        action = Action.objects.select_for_update().select_related("run").get(pk=action_id)
        if action.status != ActionStatus.UNKNOWN_OUTCOME:
            return
        run = AgentRun.objects.select_for_update().get(pk=action.run_id)
        trace_append(
            run=run,
            kind="reconcile_lookup",
            action=action,
            payload={
                "key": action.idempotency_key,
                "status": lookup.status.value,
                "detail": lookup.detail,
                "receipt": lookup.receipt,
            },
        )
        if lookup.status == ReceiptStatus.FOUND:
            envelope = success(lookup.receipt)
            action.status, action.result = ActionStatus.SUCCEEDED, envelope
            action.save(update_fields=["status", "result"])
            idempotency_complete(key=action.idempotency_key, response=envelope)
            _resume_if_clear(run, action.turn)
        elif (
            lookup.status == ReceiptStatus.ABSENT
            and action.attempts <= MAX_RECONCILE_RETRIES
            and not run.is_terminal
        ):
            idempotency_release(key=action.idempotency_key)
            action.status, action.task_id = ActionStatus.QUEUED, "enqueued"
            action.save(update_fields=["status", "task_id"])
            trace_append(
                run=run,
                kind="reconcile_retry",
                action=action,
                payload={"key": action.idempotency_key},
            )
            transaction.on_commit(lambda: _enqueue_action(action.pk))
        else:
            action.status = ActionStatus.NEEDS_HUMAN
            action.save(update_fields=["status"])
            run.reply = _still_checking(run.language)
            run.save(update_fields=["reply", "updated_at"])
            trace_append(
                run=run,
                kind="reconcile_needs_human",
                action=action,
                payload={"key": action.idempotency_key},
            )


def _resume_if_clear(run: AgentRun, turn: int) -> None:
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


def _still_checking(language: str) -> str:
    if language == "zh":
        return "正在核对预约状态：写入结果暂时无法确认，尚未重复预订。确认后会更新。"
    return "Still checking whether the booking went through; nothing has been booked twice. This page will update."


# --- finishing: the verifier decides, not the model ---------------------------------------------


def _finish_with_verification(run: AgentRun, step: Step) -> None:
    pending = run.actions.filter(
        status__in=[ActionStatus.UNKNOWN_OUTCOME, ActionStatus.NEEDS_HUMAN]
    )
    if pending.exists():
        run.status, run.reply = RunStatus.RECONCILING, _still_checking(run.language)
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
        ctx = CallContext(
            user=run.subject,
            run_id=str(run.pk),
            action_id=str(action.pk),
            idempotency_key=action.idempotency_key,
            delegation=run.delegation,
        )
        verdict = spec.verify(receipt, ctx)
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


# --- queueing (after commit) ------------------------------------------------------------------


def _enqueue_step(run_id: Any, turn: int) -> None:
    from agentops.tasks import run_step_task

    transaction.on_commit(lambda: run_step_task.delay(str(run_id), turn))


def _enqueue_action(action_id: Any, countdown: float = 0) -> None:
    from agentops.tasks import execute_action_task

    execute_action_task.apply_async(args=[str(action_id)], countdown=countdown or None)


def _enqueue_reconcile(action_id: Any) -> None:
    from agentops.tasks import reconcile_action_task

    reconcile_action_task.delay(str(action_id))


# --- the sweeper: work stuck after a crash --------------------------------------------------------

STALE_AFTER = timedelta(seconds=20)


def sweep() -> dict[str, int]:
    """Re-enqueue or reconcile work a dead worker left behind. Safe to run any time."""
    from agentops.models import IdempotencyRecord

    now = timezone.now()
    counts = {"expired_leases": 0, "requeued": 0, "reconciles": 0, "steps": 0}
    for action_id in Action.objects.filter(
        status=ActionStatus.RUNNING, lease_expires_at__lt=now
    ).values_list("pk", flat=True):
        with transaction.atomic():
            action = Action.objects.select_for_update().select_related("run").get(pk=action_id)
            if action.status != ActionStatus.RUNNING or action.lease_expires_at >= now:
                continue
            counts["expired_leases"] += 1
            run = AgentRun.objects.select_for_update().get(pk=action.run_id)
            if action.readonly:
                action.status, action.task_id = ActionStatus.QUEUED, "enqueued"
                action.save(update_fields=["status", "task_id"])
                trace_append(
                    run=run, kind="lease_expired", action=action, payload={"then": "requeued"}
                )
                transaction.on_commit(lambda pk=action.pk: _enqueue_action(pk))
            else:
                action.status = ActionStatus.UNKNOWN_OUTCOME
                action.result = failure(
                    UNKNOWN_OUTCOME,
                    "worker_lost",
                    "The worker stopped in the middle of this write.",
                    "The host reconciles it.",
                )
                action.save(update_fields=["status", "result"])
                if not run.is_terminal:
                    run.status = RunStatus.RECONCILING
                    run.save(update_fields=["status", "updated_at"])
                trace_append(
                    run=run, kind="lease_expired", action=action, payload={"then": "reconcile"}
                )
                transaction.on_commit(lambda pk=action.pk: _enqueue_reconcile(pk))
    for action_id in Action.objects.filter(status=ActionStatus.UNKNOWN_OUTCOME).values_list(
        "pk", flat=True
    ):
        counts["reconciles"] += 1
        _enqueue_reconcile(action_id)
    stale = now - STALE_AFTER
    for action_id in Action.objects.filter(
        status=ActionStatus.QUEUED,
        created_at__lt=stale,
        run__status__in=[RunStatus.RUNNING, RunStatus.RECONCILING],
    ).values_list("pk", flat=True):
        counts["requeued"] += 1
        _enqueue_action(action_id)
    for run in AgentRun.objects.filter(status=RunStatus.RUNNING, updated_at__lt=stale):
        if run.actions.filter(status__in=[ActionStatus.QUEUED, ActionStatus.RUNNING]).exists():
            continue
        counts["steps"] += 1
        if run.turn == 0 or not run.actions.filter(turn=run.turn).exists():
            _enqueue_step(run.pk, max(run.turn, 1))
        else:
            advance(run.pk, run.turn)
    counts["settled_claims"] = _settle_abandoned_claims(now)
    IdempotencyRecord.objects.filter(expires_at__lt=now).delete()
    return counts


ABANDONED_AFTER = timedelta(minutes=2)


def _settle_abandoned_claims(now) -> int:
    """A direct call whose process died mid-write leaves only its in-progress claim: settle it
    from the tool's receipt lookup, so a retry with the same key replays or runs again."""
    from agentops.models import IdempotencyRecord, IdempotencyStatus

    settled = 0
    stale = IdempotencyRecord.objects.filter(
        status=IdempotencyStatus.IN_PROGRESS, created_at__lt=now - ABANDONED_AFTER
    )
    for record in stale:
        if (
            Action.objects.filter(idempotency_key=record.key)
            .exclude(
                status__in=[
                    ActionStatus.SUCCEEDED,
                    ActionStatus.FAILED,
                    ActionStatus.REJECTED,
                    ActionStatus.CANCELLED,
                ]
            )
            .exists()
        ):
            continue  # a run's action owns it: its own reconciliation settles it
        spec = registry.get(record.tool)
        if spec is None or spec.lookup_receipt is None:
            continue
        lookup = spec.lookup_receipt(record.key)
        if lookup.status == ReceiptStatus.FOUND:
            idempotency_complete(key=record.key, response=success(lookup.receipt))
        elif lookup.status == ReceiptStatus.ABSENT:
            idempotency_release(key=record.key)
        else:
            continue
        log.warning("settled abandoned idempotency claim %s: %s", record.key, lookup.status.value)
        settled += 1
    return settled
