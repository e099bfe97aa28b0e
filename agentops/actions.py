"""Executing one action: claim it, call the tool under its idempotency key, record the
outcome, retry yellow ones, hand unknown outcomes to reconciliation."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agentops import registry
from agentops.contract import (
    UNKNOWN_OUTCOME,
    canonical_json,
    failure,
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
from agentops.queueing import enqueue_action
from agentops.runs import action_context, advance, run_enter_reconciling, run_resume_if_clear
from agentops.trace import trace_append

MAX_YELLOW_RETRIES = 3
LEASE_GRACE_S = 5

# --- executing one action ---------------------------------------------------------------------


def action_execute(action_id: Any) -> None:
    """Execute one queued action. The pending intent (the Action row with its key) exists
    before the write starts; a duplicate delivery finds it no longer queued and does nothing."""
    with transaction.atomic():
        action = (
            Action.objects.select_for_update(of=("self",))
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
        # Which call of this tool this is, for injected faults only (no query otherwise).
        call_number = (
            sum(run.actions.filter(tool=action.tool).values_list("attempts", flat=True))
            if run.faults
            else 0
        )
    envelope, outcome = _execute_call(action, spec, run, call_number)
    _record_outcome(action.pk, action.attempts, envelope, outcome)


def _execute_call(
    action: Action, spec: Any, run: AgentRun, call_number: int
) -> tuple[dict[str, Any], str]:
    args = spec.input_model.model_validate_json(canonical_json(action.params))
    ctx = action_context(run, action)
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
        action = (
            Action.objects.select_for_update(of=("self",)).select_related("run").get(pk=action_id)
        )
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
            enqueue_action(action.pk, countdown=delay)
            return
        if outcome == UNKNOWN_OUTCOME:
            run_enter_reconciling(
                run, action, kind="run_reconciling", payload={"key": action.idempotency_key}
            )
            return
        if run.status == RunStatus.RECONCILING:  # a reconciliation retry has now ended
            run_resume_if_clear(run, action.turn)
            return
        turn = action.turn
    advance(action.run_id, turn)
