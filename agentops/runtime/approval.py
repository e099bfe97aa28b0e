"""The runtime's side of human approvals: what a HIGH action's approval is bound to, opening
the request, verifying it right before execution, and going on when a human has decided.

The binding is exactly what seed 002 lists: run, action, policy version, idempotency key,
intent digest (tool + validated params + subject), environment version, environment instance,
tool generation and proposal expiry. The approval record adds the nonce and absolute expiry."""

from __future__ import annotations

import functools
import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from pydantic import BaseModel

from agentops.contract import Reason, ToolError, ToolSpec, canonical_json, exports
from agentops.models import Action, ActionStatus, AgentRun, EventKind
from agentops.runtime.idempotency import request_digest
from agentops.runtime.queue import enqueue_approval_refresh, enqueue_approval_settled
from agentops.runtime.trace import trace_append
from approvals import services as approvals
from approvals.models import RequestStatus


@functools.cache
def environment_instance() -> str:
    """Which database this is (PostgreSQL's system identifier): an approval given against a
    sandbox or a restored copy does not authorise anything here."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT system_identifier::text FROM pg_control_system()")
        return cursor.fetchone()[0]


def tool_generation(spec: ToolSpec) -> str:
    """Changes when the tool's contract changes: an approval outlives no redeclaration."""
    text = canonical_json({"name": spec.name, "input": exports.input_schema(spec)})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def binding(run: AgentRun, action: Action, spec: ToolSpec, args: BaseModel) -> dict[str, Any]:
    version = spec.environment_version(args) if spec.environment_version else None
    return {
        "run": str(run.pk),
        "action": str(action.pk),
        "policy_version": run.policy_version,
        "idempotency_key": action.idempotency_key,
        "intent_digest": request_digest(
            tool=action.tool, subject_id=run.subject_id, params=action.params
        ),
        "environment_version": version,
        "environment_instance": environment_instance(),
        "tool_generation": tool_generation(spec),
        "proposal_expiry": action.proposal_deadline.isoformat(),
    }


def approval_deadline(spec: ToolSpec, args: BaseModel, *, now: datetime) -> datetime:
    """Until when an approver may decide. A call whose effect starts at a time (a booking,
    ``ToolSpec.acts_at``) waits until APPROVAL_LEAD_MINUTES before that start, at most
    APPROVAL_DEADLINE_MAX_HOURS from now, at least APPROVAL_DEADLINE_MIN_MINUTES (never past
    the start itself); any other call APPROVAL_DEADLINE_MINUTES."""
    starts = spec.acts_at(args) if spec.acts_at is not None else None
    if starts is None:
        return now + timedelta(minutes=settings.APPROVAL_DEADLINE_MINUTES)
    latest = now + timedelta(hours=settings.APPROVAL_DEADLINE_MAX_HOURS)
    wanted = starts - timedelta(minutes=settings.APPROVAL_LEAD_MINUTES)
    floor = min(now + timedelta(minutes=settings.APPROVAL_DEADLINE_MIN_MINUTES), starts)
    # In UTC, as the database gives it back: the binding compares its ISO text.
    return max(floor, min(wanted, latest)).astimezone(UTC)


def request_open(run: AgentRun, action: Action, spec: ToolSpec, args: BaseModel) -> None:
    """A HIGH action waits: open its approval request, and let the run wait as long."""
    deadline = approval_deadline(spec, args, now=timezone.now())
    action.proposal_deadline = deadline
    action.save(update_fields=["proposal_deadline"])
    if run.deadline < deadline:
        run.deadline = deadline
        run.save(update_fields=["deadline", "updated_at"])
    subject = run.subject
    request = approvals.approval_request_open(
        action_ref=str(action.pk),
        run_ref=str(run.pk),
        requester=subject,
        binding=binding(run, action, spec, args),
        intent={
            "tool": action.tool,
            "params": action.params,
            "labels": _field_titles(spec),
            "subject": getattr(subject, "employee_id", "") or subject.get_username(),
            "department": getattr(subject, "department", ""),
            "risk_reasons": action.risk_reasons,
            "observed_version": action.observed_version,
            "goal": run.goal[:300],
        },
        deadline=deadline,
    )
    trace_append(
        run=run,
        kind=EventKind.APPROVAL_REQUESTED,
        action=action,
        payload={"request": str(request.pk), "deadline": deadline.isoformat()},
    )


def _field_titles(spec: ToolSpec) -> list[list[str]]:
    """[name, title] of each argument of the tool's input schema, in the schema's order (the inbox
    shows them, translated, in that order; a list because jsonb does not keep a dict's order)."""
    properties = spec.input_model.model_json_schema().get("properties", {})
    return [[name, str(prop.get("title") or name)] for name, prop in properties.items()]


def verify_before_execution(
    run: AgentRun, action: Action, spec: ToolSpec, args: BaseModel
) -> ToolError | None:
    """A HIGH action runs only on a signed approval of exactly this intent and state."""
    result = approvals.approval_verify_and_consume(
        action_ref=str(action.pk), binding_now=binding(run, action, spec, args)
    )
    if result.ok:
        return None
    return ToolError(
        Reason.FORBIDDEN,
        result.code,
        result.message,
        "A fresh approval of the exact intent is needed.",
    )


def on_refresh(sender: Any, request: Any, **kwargs: Any) -> None:
    """approvals' signal: an approver asked to decide a frozen action again."""
    with transaction.atomic():
        enqueue_approval_refresh(request.action_ref)


def withdraw_pending(run: AgentRun) -> None:
    """The run ended: its waiting actions' requests are withdrawn (kept as evidence)."""
    for action_id in run.actions.filter(status=ActionStatus.WAITING_APPROVAL).values_list(
        "pk", flat=True
    ):
        approvals.approval_close(action_ref=str(action_id), status=RequestStatus.WITHDRAWN)


def on_settled(sender: Any, request: Any, **kwargs: Any) -> None:
    """approvals' signal: continue the run in a worker (a request withdrawn because its run
    ended finds the run terminal there and does nothing)."""
    with transaction.atomic():
        enqueue_approval_settled(request.action_ref)
