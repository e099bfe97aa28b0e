"""The runtime's side of human approvals: what a HIGH action's approval is bound to, opening
the request, verifying it right before execution, and going on when a human has decided.

The binding is exactly what seed 002 lists: run, action, policy version, idempotency key,
intent digest (tool + validated params + subject), environment version, environment instance,
tool generation and proposal expiry. The approval record adds the nonce and absolute expiry."""

from __future__ import annotations

import functools
import hashlib
import types
import uuid
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, cast

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop
from pydantic import BaseModel, ValidationError

from agentops.contract import (
    Reason,
    SideEffect,
    ToolError,
    ToolSpec,
    canonical_json,
    exports,
    message_json,
)
from agentops.models import Action, ActionStatus, AgentRun, EventKind, RunKind
from agentops.runtime import registry, store
from agentops.runtime.context import action_context
from agentops.runtime.idempotency import request_digest
from agentops.runtime.queue import enqueue_approval_refresh, enqueue_approval_settled
from agentops.runtime.trace import trace_append
from approvals import live as approvals_live
from approvals import services as approvals
from approvals.models import RequestStatus


@functools.cache
def environment_instance() -> str:
    """Which database this is (PostgreSQL's system identifier): an approval given against a
    sandbox or a restored copy does not authorise anything here."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT system_identifier::text FROM pg_control_system()")
        return cursor.fetchone()[0]


def _stable(value: Any) -> Any:
    """A code object's content in a form that is the same in every process: marshal's bytes
    are not (they mark objects by reference count), nor is the order of a frozenset of strings
    (hash randomisation); bytecode, names and constants are."""
    if isinstance(value, types.CodeType):
        return (
            value.co_code.hex(),
            value.co_names,
            value.co_varnames,
            tuple(_stable(c) for c in value.co_consts),
        )
    if isinstance(value, frozenset):
        return sorted(repr(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_stable(v) for v in value)
    return repr(value)


def _code_identity(fn: Any) -> str | None:
    """Where a callable lives and a digest of its compiled body: a new handler or adapter, or a
    changed one, is another tool generation (the same in every process of one release). A
    decorated function (``functools.wraps``: ``__wrapped__``) is fingerprinted down to the
    function it wraps, not only the wrapper (the wrapper's body is the same for every tool)."""
    if fn is None:
        return None
    parts: list[str] = []
    target: Any = fn
    while target is not None and len(parts) < 8:
        target = getattr(target, "func", target)  # a functools.partial's function
        code = getattr(target, "__code__", None)
        body = (
            hashlib.sha256(repr(_stable(code)).encode()).hexdigest()[:16]
            if code is not None
            else ""
        )
        name = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', '')}"
        parts.append(f"{name}:{body}")
        target = getattr(target, "__wrapped__", None)
    return "<".join(parts)


@functools.cache
def _generation(spec: ToolSpec) -> str:
    text = canonical_json(
        {
            "name": spec.name,
            "input": exports.input_schema(spec),
            "output": exports.output_schema(spec),
            "meta": exports.metadata(spec),
            "code": [
                _code_identity(fn)
                for fn in (
                    spec.handler,
                    spec.lookup_receipt,
                    spec.verify,
                    spec.assess_risk,
                    spec.validate,
                    spec.environment_version,
                    spec.policy_facts,
                )
            ],
        }
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tool_generation(spec: ToolSpec) -> str:
    """Changes when anything of the tool's contract changes (seed 002's adapter generation):
    its name, input and output schema, metadata, handler and adapters. An approval outlives no
    redeclaration."""
    return _generation(spec)


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
        # The facts the policy read (a room's approval flag, department, capacity, bookable):
        # an admin's edit of any of them since the approval invalidates it.
        "policy_facts": spec.policy_facts(args) if spec.policy_facts else None,
        "environment_instance": environment_instance(),
        "tool_generation": tool_generation(spec),
        # waiting_deadlines sets it before the first binding; a call is bound only after that.
        "proposal_expiry": action.proposal_deadline.isoformat(),  # type: ignore[union-attr]
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


def waiting_deadlines(
    run: AgentRun, action: Action, spec: ToolSpec, args: BaseModel
) -> tuple[str, ...]:
    """Set the waiting action's deadline to its approval's, and extend the run's to it; the
    run's fields changed (for the caller to save)."""
    deadline = approval_deadline(spec, args, now=timezone.now())
    action.proposal_deadline = deadline
    if run.deadline < deadline:
        run.deadline = deadline
        return ("deadline",)
    return ()


def request_open(
    run: AgentRun, action: Action, spec: ToolSpec, args: BaseModel, *, new_action: bool = False
) -> None:
    """A HIGH action waits: open its approval request, and let the run wait as long.
    ``new_action``: the caller recorded the action just now, in this transaction, with both
    deadlines set (``waiting_deadlines``) and saved: no request of it can exist yet."""
    if not new_action:
        changed = waiting_deadlines(run, action, spec, args)
        action.save(update_fields=["proposal_deadline"])
        if changed:
            run.save(update_fields=[*changed, "updated_at"])
    deadline = cast(datetime, action.proposal_deadline)  # set just now, or by the caller
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
            # In the approver's words (rendered in their language at display time).
            "requester_name": subject.get_full_name() or subject.get_username(),
            "channel": _channel(run, action),
            "summary": _describe(run, action, spec, args),
        },
        deadline=deadline,
        new_action=new_action,
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
    return [list(pair) for pair in _schema_titles(spec)]


@functools.cache
def _schema_titles(spec: ToolSpec) -> tuple[tuple[str, str], ...]:
    """Once per declaration: building the JSON schema cost ~1 ms of every approval request."""
    properties = spec.input_model.model_json_schema().get("properties", {})
    return tuple((name, str(prop.get("title") or name)) for name, prop in properties.items())


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
    run_ref = request.run_ref if _is_uuid(request.run_ref) else None  # spares a look-up
    with transaction.atomic():
        enqueue_approval_settled(request.action_ref, run_id=run_ref)


# How a request reached the runtime, in words (the channel of a direct call is the prefix of its
# idempotency key: "<channel>:<user>:<key>").
CHANNEL_WORDS = {
    "web": gettext_noop("on the booking screen"),
    "api": gettext_noop("through the JSON API"),
    "mcp": gettext_noop("through an MCP client"),
    "assistant": gettext_noop("asked the assistant: “%(goal)s”"),
}


def _channel(run: AgentRun, action: Action) -> dict[str, Any]:
    if run.kind == RunKind.ASSISTANT:
        return {"msgid": CHANNEL_WORDS["assistant"], "params": {"goal": run.goal[:300]}}
    if run.kind == RunKind.MCP:
        return {"msgid": CHANNEL_WORDS["mcp"], "params": {}}
    prefix = (action.idempotency_key or "").split(":", 1)[0]
    return {"msgid": CHANNEL_WORDS.get(prefix, CHANNEL_WORDS["api"]), "params": {}}


def _describe(run: AgentRun, action: Action, spec: ToolSpec, args: BaseModel) -> Any:
    if spec.describe is None:
        return None
    return message_json(spec.describe(action_context(run, action), args))


NOT_RUNNABLE = gettext_noop("This request can no longer run: %(state)s.")


def _loaded(action_ref: str) -> tuple[Action, ToolSpec, BaseModel] | None:
    if not _is_uuid(action_ref):
        return None
    action = store.action_with_run(action_ref)
    spec = registry.get(action.tool) if action is not None else None
    if action is None or spec is None:
        return None
    try:
        args = spec.input_model.model_validate_json(canonical_json(action.params))
    except ValidationError:
        return None
    return action, spec, args


def request_recheck(*, action_ref: str, signed_binding: dict[str, Any]) -> list[dict[str, Any]]:
    """What would stop this waiting action from succeeding if it were approved now, as stored
    messages (empty: it can still succeed): the tool's own re-check of its intent against the
    present (slot, room facts, requester). Reads only. A binding that merely drifted (another
    slot of the room was booked) is no obstacle here: the approval then freezes before it runs
    and asks for a fresh one against the current state (``verify_before_execution``)."""
    loaded = _loaded(action_ref)
    if loaded is None:  # not an action of this runtime: nothing known stands in its way
        return []
    action, spec, args = loaded
    run = action.run
    if action.status != ActionStatus.WAITING_APPROVAL or run.is_terminal:
        return [{"msgid": NOT_RUNNABLE, "params": {"state": action.status}}]
    if spec.recheck is None:
        return []
    return [m.as_json() for m in spec.recheck(action_context(run, action), args)]


class OutcomeState(StrEnum):
    DONE = "done"
    FAILED = "failed"
    RUNNING = "running"
    UNCLEAR = "unclear"
    NOT_RUN = "not_run"


OUTCOME_WORDS = {
    OutcomeState.DONE: gettext_noop("Done as approved."),
    OutcomeState.RUNNING: gettext_noop("Approved; it is being carried out."),
    OutcomeState.UNCLEAR: gettext_noop(
        "Approved, but whether it happened is unclear: an operator is checking."
    ),
    OutcomeState.FAILED: gettext_noop("Approved, but it failed: %(why)s %(not_done)s"),
    OutcomeState.NOT_RUN: gettext_noop("Approved, but it did not run: %(not_done)s"),
}
# Refused right before it ran (seed 002: its binding no longer matched, or a precheck failed).
REFUSED_WORDS = gettext_noop("Approved, but it did not run: %(why)s %(not_done)s")
NOTHING_DONE = gettext_noop("Nothing was done.")
FAILED_WHY = gettext_noop("it failed")


def _outcome(action: Action, spec: ToolSpec | None) -> dict[str, Any]:
    status = action.status
    not_done = message_json(spec.not_done) if spec and spec.not_done else {"msgid": NOTHING_DONE}
    if status == ActionStatus.SUCCEEDED:
        state = OutcomeState.DONE
    elif status in (ActionStatus.UNKNOWN_OUTCOME, ActionStatus.NEEDS_HUMAN):
        state = OutcomeState.UNCLEAR
    elif status in (ActionStatus.FAILED, ActionStatus.REJECTED):
        # Rejected after an approval: refused right before it ran (seed 002: a binding that no
        # longer matches, or a precheck that no longer passes), so it did not run.
        envelope = action.result or {}
        detail = envelope.get("detail") or {}
        why: Any = (
            {"msgid": detail["msgid"], "params": detail.get("params") or {}}
            if detail.get("msgid")
            else (envelope.get("message") or {"msgid": FAILED_WHY})
        )
        now = _recheck_now(action, spec)
        if now and (
            envelope.get("reason") == Reason.CONFLICT or envelope.get("code") == "approval_drifted"
        ):
            why = now[0]  # in the domain's words ("R12 was taken meanwhile"), not its versions
        refused = status == ActionStatus.REJECTED
        return {
            "state": OutcomeState.NOT_RUN if refused else OutcomeState.FAILED,
            "message": {
                "msgid": REFUSED_WORDS if refused else OUTCOME_WORDS[OutcomeState.FAILED],
                "params": {"why": why, "not_done": not_done},
            },
        }
    elif status == ActionStatus.CANCELLED or action.run.is_terminal:
        state = OutcomeState.NOT_RUN
    else:
        state = OutcomeState.RUNNING
    params = {"not_done": not_done} if state == OutcomeState.NOT_RUN else {}
    return {"state": state, "message": {"msgid": OUTCOME_WORDS[state], "params": params}}


def _recheck_now(action: Action, spec: ToolSpec | None) -> list[dict[str, Any]]:
    if spec is None or spec.recheck is None:
        return []
    loaded = _loaded(str(action.pk))
    if loaded is None:
        return []
    _, _, args = loaded
    return [m.as_json() for m in spec.recheck(action_context(action.run, action), args)]


def request_outcomes(*, action_refs: list[str]) -> dict[str, dict[str, Any]]:
    """What became of each approved action (by its reference), read from the action's status
    and result: ``{"state": ..., "message": stored message}``. Unknown references are absent."""
    refs = [r for r in action_refs if _is_uuid(r)]
    actions = Action.objects.filter(pk__in=refs).select_related("run", "run__subject")
    return {str(a.pk): _outcome(a, registry.get(a.tool)) for a in actions}


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(str(text))
    except ValueError:
        return False
    return True


def outcome_announce(action_id: Any) -> None:
    """An approved action ran: the open inboxes re-read, so its outcome shows live."""
    if Action.objects.filter(pk=action_id, risk=SideEffect.HIGH.value).exists():
        approvals_live.inbox_poke()
