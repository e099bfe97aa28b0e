"""The synchronous side of the MCP server: who is calling, the run of their MCP session, the
tool list they may see, their calls (through the one recorder) and the status of their own
actions. Called from the async server through ``sync_to_async``; nothing here knows about the
transport."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.selectors import user_roles
from accounts.services import token_authenticate
from agentops.contract import Delegation, Reason, exports, failure, success
from agentops.models import (
    OPEN_ACTION_STATUSES,
    UNSETTLED_ACTION_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    RunKind,
    RunOutcome,
    RunStatus,
)
from agentops.runtime import ratelimit, registry
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.kinds import run_create
from agentops.runtime.locks import lock_run
from agentops.runtime.timing import MCP_SESSION_BUDGETS
from agentops.runtime.transitions import run_move
from approvals.selectors import approval_request_latest

STATUS_TOOL = "get_action_status"
CHANNEL = "mcp"


def mcp_user(*, raw_token: str | None) -> Any:
    """The user a request acts as: the bearer token's, and nothing else. Only when the
    test-only setting MCP_INSECURE_DEMO_USER is set does a request without a token act as
    that one user (the conformance suite's client cannot send a token)."""
    if raw_token:
        return token_authenticate(raw=raw_token)
    if settings.MCP_INSECURE_DEMO_USER:
        return (
            get_user_model()
            .objects.filter(username=settings.MCP_INSECURE_DEMO_USER, is_active=True)
            .first()
        )
    return None


def _user(user_id: int) -> Any:
    return get_user_model().objects.get(pk=user_id, is_active=True)


# --- tools/list -------------------------------------------------------------------------------


STATUS_TOOL_DEFINITION: dict[str, Any] = {
    "name": STATUS_TOOL,
    "title": "Get action status",
    "description": (
        "Reports what became of one of your own earlier calls: its status, the approver's "
        "decision and, once it ran, its receipt.\n"
        "[When to use] After a call answered code approval_pending (or in_progress), to learn "
        "whether it was approved, rejected, or has run.\n"
        "[Not the same as] The domain's read tools (get_booking, list_my_bookings) read the "
        "environment; this reads the runtime's record of one call.\n"
        "[Parameters] action_id: the id in the pending answer's pending.action_id (a UUID).\n"
        "[Constraints and side effects] Read-only. Only your own actions; any other id answers "
        "not_found. Counts against your per-minute call limit.\n"
        '[Example] get_action_status({"action_id": "3f0c…"}) -> {"status": "succeeded", '
        '"decision": {"status": "approved", ...}, "receipt": {"booking_id": "B204", ...}}'
    ),
    "inputSchema": {
        "type": "object",
        "properties": {"action_id": {"type": "string", "format": "uuid"}},
        "required": ["action_id"],
        "additionalProperties": False,
    },
    "outputSchema": exports.envelope_schema({"type": "object"}),
    "annotations": {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
}


def mcp_tools(*, user_id: int) -> list[dict[str, Any]]:
    """The caller's tools, each as its MCP definition, and the status tool."""
    roles = user_roles(user=_user(user_id))
    return [exports.mcp_tool(s) for s in registry.visible_to(roles)] + [STATUS_TOOL_DEFINITION]


def mcp_tool_names(*, user_id: int) -> frozenset[str]:
    roles = user_roles(user=_user(user_id))
    return frozenset(s.name for s in registry.visible_to(roles)) | {STATUS_TOOL}


# --- the session's run ------------------------------------------------------------------------


def mcp_session_run(*, user: Any, session_id: str) -> AgentRun:
    """The run of this MCP session, created by its first call: its own id and budgets, the
    tools the subject may see, writes bounded by the call budget."""
    run = AgentRun.objects.filter(channel_session=session_id).first()
    if run is None:
        roles = user_roles(user=user)
        delegation = Delegation(
            tools=frozenset(s.name for s in registry.visible_to(roles)),
            max_writes=MCP_SESSION_BUDGETS.max_tool_calls,
        )
        try:
            with transaction.atomic():
                run = run_create(
                    kind=RunKind.MCP,
                    subject=user,
                    goal=f"MCP session {session_id[:16]}",
                    model_name="mcp",
                    delegation=delegation,
                    budgets=MCP_SESSION_BUDGETS,
                    channel_session=session_id,
                )
        except IntegrityError:  # a concurrent first call of the same session created it
            run = AgentRun.objects.get(channel_session=session_id)
    if run.subject_id != user.pk:
        raise PermissionError("this MCP session belongs to another subject")
    return run


def mcp_session_end(*, user_id: int, session_id: str) -> None:
    """The client closed its session: its run ends, unless a call in it still waits for an
    approval or an outcome (then the run stays open for it, and for get_action_status, until
    its deadline)."""
    run_id = (
        AgentRun.objects.filter(channel_session=session_id, subject_id=user_id)
        .values_list("pk", flat=True)
        .first()
    )
    if run_id is not None:
        _session_close(run_id)


def mcp_sessions_expire(*, now: Any) -> int:
    """The sweeper: session runs past their deadline (the client went away without closing,
    or its last waiting call settled) end once nothing in them is waiting."""
    due = AgentRun.objects.filter(kind=RunKind.MCP, status=RunStatus.RUNNING, deadline__lt=now)
    return sum(_session_close(run_id) for run_id in due.values_list("pk", flat=True))


def _session_close(run_id: Any) -> bool:
    busy = OPEN_ACTION_STATUSES | UNSETTLED_ACTION_STATUSES | {ActionStatus.WAITING_APPROVAL}
    with transaction.atomic():
        run = lock_run(run_id)
        if run.status != RunStatus.RUNNING or run.actions.filter(status__in=busy).exists():
            return False
        run_move(run, RunStatus.SUCCEEDED, outcome=RunOutcome.SESSION_ENDED, reply="")
        return True


# --- tools/call -------------------------------------------------------------------------------


def mcp_call(
    *,
    user_id: int,
    session_id: str | None,
    name: str,
    arguments: dict[str, Any],
    idempotency_key: str | None,
) -> dict[str, Any]:
    """One tools/call: the status tool, or a governed call through the one recorder (gate,
    idempotency, approvals, trace) as the next turn of the session's run."""
    user = _user(user_id)
    if name == STATUS_TOOL:
        return action_status(user=user, arguments=arguments)
    run = mcp_session_run(user=user, session_id=session_id) if session_id else None
    envelope = tool_call_governed(
        user=user,
        name=name,
        arguments=arguments,
        idempotency_key=idempotency_key,
        channel=CHANNEL,
        session_run_id=run.pk if run else None,
    )
    if envelope.get("code") == "approval_pending":
        envelope["hint"] = (
            f"An approver decides in the approvals inbox; call {STATUS_TOOL} with this "
            "action_id to learn the decision and the receipt."
        )
    return envelope


def action_status(*, user: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The status, decision and receipt of one of the caller's own actions."""
    retry_after_ms = ratelimit.tool_calls.hit(user.pk)
    if retry_after_ms is not None:
        return failure(
            Reason.RATE_LIMITED,
            "rate_limited",
            "Too many tool calls this minute.",
            "Wait before calling again.",
            retry_after_ms,
        )
    extra = sorted(str(k)[:40] for k in arguments if k != "action_id")
    try:
        if extra:
            raise ValueError(f"unexpected field(s): {', '.join(extra)}")
        action_id = uuid.UUID(str(arguments.get("action_id", "")))
    except ValueError as exc:
        return failure(
            Reason.INVALID_INPUT,
            "schema_violation",
            f"Invalid arguments: action_id must be a UUID ({exc}).",
            "Use pending.action_id from the pending answer.",
        )
    action = Action.objects.filter(pk=action_id, run__subject=user).select_related("run").first()
    if action is None:  # another subject's action looks exactly like a missing one
        return failure(
            Reason.NOT_FOUND,
            "action_not_found",
            "You have no action with this id.",
            "Use an action_id from one of your own calls.",
        )
    request = approval_request_latest(action_ref=str(action.pk))
    record = getattr(request, "record", None) if request else None
    result = action.result or {}
    return success(
        {
            "action_id": str(action.pk),
            "run_id": str(action.run_id),
            "tool": action.tool,
            "status": action.status,
            "decision": (
                {
                    "status": request.status,
                    "approver": record.approver.get_username() if record else None,
                    "reason": record.reason if record else "",
                }
                if request
                else None
            ),
            "receipt": result.get("data") if action.status == ActionStatus.SUCCEEDED else None,
            "result": result or None,
        },
        observed_at=timezone.now(),
    )
