"""Runtime reads."""

from __future__ import annotations

from typing import Any

from accounts.models import Role
from accounts.selectors import user_roles
from agentops.models import AgentRun, RunKind, TraceEvent
from agentops.trace import event_json
from approvals.models import ApprovalRequest, RequestStatus


def run_get_for_user(*, run_id: Any, user: Any) -> AgentRun | None:
    """The user's own run; someone else's reads as absent."""
    return AgentRun.objects.filter(pk=run_id, subject=user).first()


def run_events_after(*, run_id: Any, after: int, limit: int = 500) -> list[dict[str, Any]]:
    """Events of a run after sequence number ``after``, in order (what a reconnecting reader missed)."""
    rows = TraceEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:limit]
    return [event_json(e) for e in rows]


def run_get_for_viewer(*, run_id: Any, user: Any) -> AgentRun | None:
    """A run the user may watch: their own, one with an approval request this approver may
    decide now, or any run for an admin. Any other reads as absent (existence not revealed)."""
    run = AgentRun.objects.filter(pk=run_id).first()
    if run is None or run.subject_id == user.pk:
        return run
    roles = user_roles(user=user)
    if Role.ADMIN in roles:
        return run
    if Role.APPROVER in roles and (
        ApprovalRequest.objects.filter(run_ref=str(run.pk), status=RequestStatus.PENDING)
        .exclude(requester=user)
        .exists()
    ):
        return run
    return None


def run_list_for_user(*, user: Any, limit: int = 20) -> list[AgentRun]:
    """The user's assistant runs, newest first."""
    return list(
        AgentRun.objects.filter(subject=user, kind=RunKind.ASSISTANT).order_by("-created_at")[
            :limit
        ]
    )
