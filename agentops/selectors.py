"""Runtime reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch

from accounts.models import Role
from accounts.selectors import user_roles
from agentops.models import Action, AgentRun, EventKind, RunKind, RunStatus, TraceEvent
from agentops.trace import event_json
from approvals.selectors import approval_pending_for_run


def run_get_for_user(*, run_id: Any, user: Any) -> AgentRun | None:
    """The user's own run; someone else's reads as absent."""
    return AgentRun.objects.filter(pk=run_id, subject=user).first()


def run_events_after(*, run_id: Any, after: int, limit: int = 500) -> list[dict[str, Any]]:
    """Events of a run after sequence number ``after``, in order (what a reconnecting reader missed)."""
    rows = TraceEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:limit]
    return [event_json(e) for e in rows]


@dataclass(frozen=True)
class PendingRollback:
    """A run whose rollback a human must finish: the writes still held, the compensations
    that failed, and the evidence the runtime recorded when it stopped."""

    run: AgentRun
    held: list[str]  # what the reply named as still held (e.g. booking codes)
    released: list[str]
    compensations: list[Action]  # every compensation of the run, in the order they ran
    evidence: list[dict[str, Any]]


def runs_rollback_pending(*, limit: int = 100) -> list[PendingRollback]:
    """Runs in ``rollback_pending``, oldest first (the operators' queue lists them)."""
    runs = (
        AgentRun.objects.filter(status=RunStatus.ROLLBACK_PENDING)
        .select_related("subject")
        .prefetch_related(
            Prefetch(
                "actions",
                queryset=Action.objects.filter(compensates__isnull=False).order_by(
                    "turn", "call_index"
                ),
                to_attr="compensation_actions",
            ),
            Prefetch(
                "events",
                queryset=TraceEvent.objects.filter(kind=EventKind.RUN_ROLLBACK_PENDING).order_by(
                    "-seq"
                ),
                to_attr="rollback_events",
            ),
        )
        .order_by("updated_at")[:limit]
    )
    pending = []
    for run in runs:
        payload = run.rollback_events[0].payload if run.rollback_events else {}
        pending.append(
            PendingRollback(
                run=run,
                held=list(payload.get("held", [])),
                released=list(payload.get("released", [])),
                compensations=list(run.compensation_actions),
                evidence=list(payload.get("evidence", [])),
            )
        )
    return pending


def run_get_for_viewer(*, run_id: Any, user: Any) -> AgentRun | None:
    """A run the user may watch: their own, one with an approval request this approver may
    decide now, or any run for an admin. Any other reads as absent (existence not revealed)."""
    run = AgentRun.objects.filter(pk=run_id).first()
    if run is None or run.subject_id == user.pk:
        return run
    roles = user_roles(user=user)
    if Role.ADMIN in roles:
        return run
    if Role.APPROVER in roles and approval_pending_for_run(run_ref=str(run.pk), approver=user):
        return run
    return None


def run_list_for_user(*, user: Any, limit: int = 20) -> list[AgentRun]:
    """The user's assistant runs, newest first."""
    return list(
        AgentRun.objects.filter(subject=user, kind=RunKind.ASSISTANT).order_by("-created_at")[
            :limit
        ]
    )
