"""A call of a 2026-07-28 MCP client that waits for an approver, and what the client holds
meanwhile. That revision keeps no session on the server, so the wait lives in the database and
the client carries a handle to it:

- a ``requestState`` (multi round-trip requests): the server answers ``input_required`` with a
  state naming the waiting action and a nonce. The SDK's ``RequestStateBoundary`` seals it (AES-GCM
  under a key derived from SECRET_KEY), binding the principal, an expiry and the digest of the
  call; here each nonce is used once. The client retries the same call with it: while the
  approver has not decided the answer is ``input_required`` again with a new state; once the
  call ran (it runs when it is approved, and only then, exactly once) the retry answers its
  outcome.
- a task (the ``io.modelcontextprotocol/tasks`` extension), for a client that declared it: a
  random task id the client polls with ``tasks/get`` or ends with ``tasks/cancel``.

Nothing here knows about the transport; the server calls these through ``sync_to_async``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentops.contract import Reason, failure
from agentops.models import (
    UNSETTLED_ACTION_STATUSES,
    Action,
    ActionStatus,
    McpHandle,
    McpHandleKind,
)
from agentops.runtime import ratelimit
from agentops.runtime.proposals import call_digest
from approvals.selectors import approval_request_latest
from approvals.services import approval_withdraw

STATE_TTL = timedelta(minutes=10)  # a requestState the client does not send back in time expires
TASK_RETENTION = timedelta(hours=1)  # a task stays readable this long after its call's deadline
POLL_INTERVAL_MS = 2000
WAITING = frozenset({ActionStatus.WAITING_APPROVAL, ActionStatus.QUEUED, ActionStatus.RUNNING})


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _own_action(*, user_id: int, action_id: Any) -> Action | None:
    try:
        pk = uuid.UUID(str(action_id))
    except ValueError:
        return None
    return Action.objects.filter(pk=pk, run__subject_id=user_id).first()


def outcome(action: Action) -> dict[str, Any] | None:
    """The envelope a waiting call finally answers, or None while it still waits."""
    if action.status in WAITING:
        return None
    if action.result:
        return dict(action.result)
    if action.status == ActionStatus.CANCELLED:
        return failure(
            Reason.RUN_TERMINAL,
            "cancelled",
            "This call was cancelled before it ran; nothing was done.",
            "Make the call again if it is still wanted.",
        )
    return failure(  # unknown outcome or a human's reconciliation: the operators have it
        Reason.UNKNOWN_OUTCOME,
        "outcome_unknown",
        "Whether this call took effect is not known yet; an operator is checking.",
        "Call get_action_status with this action_id later.",
    )


# --- requestState ------------------------------------------------------------------------------


def state_mint(*, user_id: int, action_id: Any) -> str:
    """The plaintext of a fresh requestState for the caller's waiting action (the SDK seals it)."""
    action = Action.objects.get(pk=action_id, run__subject_id=user_id)
    nonce = secrets.token_urlsafe(18)
    expires = timezone.now() + STATE_TTL
    if action.proposal_deadline is not None:
        expires = min(expires, action.proposal_deadline + TASK_RETENTION)
    McpHandle.objects.create(
        digest=_digest(nonce),
        kind=McpHandleKind.STATE,
        subject_id=user_id,
        action=action,
        expires_at=expires,
    )
    return json.dumps({"action_id": str(action.pk), "nonce": nonce}, separators=(",", ":"))


def state_redeem(
    *, user_id: int, state: str, name: str, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any] | None] | None:
    """Use a requestState's nonce, once: ``(action_id, the envelope to answer, or None while
    the call waits)``; or None when the state is not one this server minted for this caller
    and this call, was used before, or expired. A retry counts against the caller's per-minute
    call limit like any call: over it, the answer is the yellow ``rate_limited`` and the state
    is left unused for the retry after."""
    try:
        claims = json.loads(state)
        action_id, nonce = str(claims["action_id"]), str(claims["nonce"])
    except (ValueError, KeyError, TypeError):
        return None
    action = _own_action(user_id=user_id, action_id=action_id)
    if action is None or action.params_digest != call_digest(name, arguments):
        return None
    retry_after_ms = ratelimit.tool_calls.hit(user_id)
    if retry_after_ms is not None:
        return str(action.pk), failure(
            Reason.RATE_LIMITED,
            "rate_limited",
            "Too many tool calls this minute.",
            "Retry later with the same requestState.",
            retry_after_ms,
        )
    with transaction.atomic():
        used = McpHandle.objects.filter(
            digest=_digest(nonce),
            kind=McpHandleKind.STATE,
            subject_id=user_id,
            action=action,
            used_at__isnull=True,
            expires_at__gt=timezone.now(),
        ).update(used_at=timezone.now())
    if used != 1:
        return None
    action.refresh_from_db()
    return str(action.pk), outcome(action)


# --- tasks --------------------------------------------------------------------------------------


def _ttl_ms(handle: McpHandle) -> int:
    return max(0, int((handle.expires_at - handle.created_at).total_seconds() * 1000))


def _task(handle: McpHandle, task_id: str) -> dict[str, Any]:
    """The task as ``tasks/get`` answers it (the server adds the CallToolResult shape)."""
    action = handle.action
    answer = outcome(action)
    task: dict[str, Any] = {
        "taskId": task_id,
        "createdAt": handle.created_at.isoformat(),
        "lastUpdatedAt": (action.finished_at or handle.created_at).isoformat(),
        "ttlMs": _ttl_ms(handle),
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if answer is None:
        waiting = action.status == ActionStatus.WAITING_APPROVAL
        task["status"] = "working"
        task["statusMessage"] = (
            "Waiting for an approver." if waiting else "Approved; the call is running."
        )
    elif action.status in UNSETTLED_ACTION_STATUSES:  # a task can wait for the operators too
        task["status"] = "working"
        task["statusMessage"] = "Whether the call took effect is being checked by an operator."
    elif action.status == ActionStatus.CANCELLED:
        task["status"] = "cancelled"
        task["statusMessage"] = "Cancelled before it ran; nothing was done."
    else:
        task["status"] = "completed"
        task["envelope"] = answer
    return task


def task_create(*, user_id: int, action_id: Any) -> dict[str, Any]:
    """A durable task for the caller's waiting action: readable by any web process before the
    answer that names it leaves."""
    action = Action.objects.get(pk=action_id, run__subject_id=user_id)
    task_id = secrets.token_urlsafe(24)
    deadline = action.proposal_deadline or timezone.now() + STATE_TTL
    handle = McpHandle.objects.create(
        digest=_digest(task_id),
        kind=McpHandleKind.TASK,
        subject_id=user_id,
        action=action,
        expires_at=deadline + TASK_RETENTION,
    )
    return _task(handle, task_id)


def _task_handle(*, user_id: int, task_id: str) -> McpHandle | None:
    """The caller's own live task; another subject's id looks exactly like an unknown one."""
    if not isinstance(task_id, str) or not 1 <= len(task_id) <= 100:
        return None
    return (
        McpHandle.objects.filter(
            digest=_digest(task_id),
            kind=McpHandleKind.TASK,
            subject_id=user_id,
            expires_at__gt=timezone.now(),
        )
        .select_related("action", "subject")
        .first()
    )


def task_get(*, user_id: int, task_id: str) -> dict[str, Any] | None:
    handle = _task_handle(user_id=user_id, task_id=task_id)
    return _task(handle, task_id) if handle is not None else None


def task_cancel(*, user_id: int, task_id: str) -> bool:
    """Cancel the task's call while it waits: its approval request is withdrawn, as its
    requester would from the requests page (audited as theirs), and the runtime then ends what
    waited on it. A call already decided goes on (it may be running). False for an unknown
    task."""
    handle = _task_handle(user_id=user_id, task_id=task_id)
    if handle is None:
        return False
    request = approval_request_latest(action_ref=str(handle.action_id))
    if handle.action.status == ActionStatus.WAITING_APPROVAL and request is not None:
        approval_withdraw(request_id=request.pk, user=handle.subject)
    return True
