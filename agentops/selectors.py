"""The engine's front door for reads. Screens, the JSON API, the live socket and MCP read
runtime state only through these names (the writes: ``agentops.services``); the names are
pinned by ``tests/agentops/test_door.py``.

- Runs: ``run_detail_for_user`` (the API's view), ``run_events_after`` (a reader catching up),
  ``run_get_for_viewer``, ``run_list_for_user``, ``run_story`` (an admin's whole story),
  ``runs_rollback_pending``; the live group of a run: ``run_group``.
- Tools: ``tool_get``, ``tools_all``, ``tools_visible_to`` (by roles), and the MCP view of them
  (``mcp_user``, ``mcp_tools``, ``mcp_tool_names``), and a 2026-07-28 client's task (``mcp_task_get``).
- Approvals: ``approval_recheck`` (what stands in a waiting action's way now) and
  ``approval_outcomes`` (what became of approved actions), installed as approvals' hooks.
- The operators' queue: ``actions_needing_human`` (+ count), its live group ``QUEUE_GROUP``, ``rollbacks_pending_count``,
  ``may_reconcile``.
- The audit log: ``audit_rows``, ``audit_row``, ``audit_details``, ``audit_export_chunks``
  with ``AuditFilters``, ``ExportFormat``, ``RowKind``; drills: ``drill_get``,
  ``drill_latest``.
- The types a reader needs: the run and its status enums, request limits (``MAX_REQUEST_CHARS``,
  ``ScopeIn``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Prefetch

from accounts.models import Role, User
from accounts.selectors import user_roles
from agentops.models import (
    TERMINAL_RUN_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunKind,
    RunOutcome,
    RunStatus,
    TraceEvent,
)
from agentops.runtime.approval import request_outcomes as approval_outcomes
from agentops.runtime.approval import request_recheck as approval_recheck
from agentops.runtime.auditlog import (
    AuditFilters,
    ExportFormat,
    RowKind,
    audit_details,
    audit_export_chunks,
    audit_row,
    audit_rows,
)
from agentops.runtime.circuit import circuits_open as tools_paused
from agentops.runtime.drills import drill_get, drill_latest
from agentops.runtime.mcp_sessions import mcp_tool_names, mcp_tools, mcp_user
from agentops.runtime.mcp_waits import task_get as mcp_task_get
from agentops.runtime.operator_queue import (
    UnclearWrite,
    actions_needing_human,
    actions_needing_human_count,
    rollbacks_pending_count,
)
from agentops.runtime.queue_notice import QUEUE_GROUP
from agentops.runtime.reconcile import may_reconcile
from agentops.runtime.registry import all_tools as tools_all
from agentops.runtime.registry import get as tool_get
from agentops.runtime.registry import visible_to as tools_visible_to
from agentops.runtime.runs import MAX_REQUEST_CHARS, ScopeIn
from agentops.runtime.store import run_detail_row
from agentops.runtime.story import RunStory, run_story
from agentops.runtime.trace import event_json, run_group
from approvals.selectors import approval_pending_for_run

__all__ = [
    "MAX_REQUEST_CHARS",
    "QUEUE_GROUP",
    "TERMINAL_RUN_STATUSES",
    "ActionStatus",
    "AgentRun",
    "AuditFilters",
    "EventKind",
    "ExportFormat",
    "PendingRollback",
    "RowKind",
    "RunDetail",
    "RunKind",
    "RunOutcome",
    "RunStatus",
    "RunStory",
    "ScopeIn",
    "UnclearWrite",
    "actions_needing_human",
    "actions_needing_human_count",
    "approval_outcomes",
    "approval_recheck",
    "audit_details",
    "audit_export_chunks",
    "audit_row",
    "audit_rows",
    "drill_get",
    "drill_latest",
    "may_reconcile",
    "mcp_task_get",
    "mcp_tool_names",
    "mcp_tools",
    "mcp_user",
    "rollbacks_pending_count",
    "run_conversation_before",
    "run_detail_for_user",
    "run_events_after",
    "run_get_for_viewer",
    "run_group",
    "run_list_for_user",
    "run_story",
    "runs_rollback_pending",
    "tool_get",
    "tools_all",
    "tools_paused",
    "tools_visible_to",
]


@dataclass(frozen=True)
class RunDetail:
    """A run as `GET /api/runs/<id>` shows it: its columns, every trace event in order, and the
    data of its succeeded writes (the receipts) in the order they ran."""

    run_id: uuid.UUID
    kind: str
    status: str
    outcome: str
    reply: str
    goal: str
    conversation_id: uuid.UUID | None
    delegation: dict[str, Any]
    turn: int
    created_at: datetime
    finished_at: datetime | None
    events: list[dict[str, Any]]
    receipts: list[dict[str, Any]]


def run_detail_for_user(*, run_id: uuid.UUID, user: User) -> RunDetail | None:
    """The user's own run with its events and receipts (one statement: store.RUN_DETAIL_SQL);
    someone else's reads as absent."""
    row = run_detail_row(run_id, user.pk)
    if row is None:
        return None
    *columns, delegation, turn, created_at, finished_at, events, writes = row
    return RunDetail(
        *columns,
        delegation=AgentRun._meta.get_field("delegation").from_db_value(delegation, None, None),
        turn=turn,
        created_at=created_at,
        finished_at=finished_at,
        events=[
            {
                "seq": seq,
                "kind": kind,
                "at": datetime.fromisoformat(at).isoformat(),  # as the ORM's datetimes print
                "action_id": action_id or "",
                "payload": payload,
            }
            for seq, kind, at, action_id, payload in events or ()
        ],
        receipts=[{"tool": tool, "receipt": data} for tool, data in writes or () if data],
    )


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


def run_conversation_before(*, run: AgentRun, limit: int = 10) -> list[AgentRun]:
    """The earlier turns of ``run``'s conversation (runs of the same person), oldest first."""
    if run.conversation_id is None:
        return []
    earlier = AgentRun.objects.filter(
        subject_id=run.subject_id,
        conversation_id=run.conversation_id,
        kind=RunKind.ASSISTANT,
        created_at__lt=run.created_at,
    ).order_by("-created_at")[:limit]
    return list(reversed(list(earlier)))


def run_list_for_user(*, user: Any, limit: int = 20) -> list[AgentRun]:
    """The user's assistant runs, newest first."""
    return list(
        AgentRun.objects.filter(subject=user, kind=RunKind.ASSISTANT).order_by("-created_at")[
            :limit
        ]
    )
