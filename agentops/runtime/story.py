"""The whole story of one run, read from the database: who asked what, the delegation, every
proposal with its gate decision and why, idempotency keys, approvals with their bindings,
receipts, verification, human decisions and the timing of each step.

Who may read it: admins every run, a run's subject their own; anyone else gets None (the view
answers 404, as the JSON API does for someone else's run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from accounts.models import AuditEntry, Role, User
from accounts.selectors import user_roles
from agentops.models import Action, ActionStatus, AgentRun, EventKind, TraceEvent
from agentops.runtime.auditlog import parse_uuid
from agentops.runtime.kinds import rules
from approvals.models import ApprovalRequest
from approvals.selectors import approval_requests_for_run


@dataclass
class Step:
    """One proposed call and everything that happened to it."""

    action: Action
    events: list[TraceEvent] = field(default_factory=list)
    gate: dict[str, Any] = field(default_factory=dict)
    receipt: dict[str, Any] | None = None
    queued_ms: int | None = None  # proposal to first attempt

    @property
    def refused(self) -> bool:
        return self.action.status == ActionStatus.REJECTED


@dataclass
class RunStory:
    run: AgentRun
    steps: list[Step]
    events: list[TraceEvent]
    approvals: list[ApprovalRequest]
    decisions: list[AuditEntry]
    verifications: list[TraceEvent]
    trace_problems: list[str]
    total_ms: int | None


def run_visible(*, run: AgentRun, viewer: User) -> bool:
    return run.subject_id == viewer.pk or Role.ADMIN in user_roles(user=viewer)


def run_story(*, run_id: str, viewer: User) -> RunStory | None:
    """The run's story for ``viewer``, or None when there is no such run or it is not theirs
    to see."""
    pk = parse_uuid(run_id)
    run = AgentRun.objects.select_related("subject").filter(pk=pk).first() if pk else None
    if run is None or not run_visible(run=run, viewer=viewer):
        return None
    events = list(TraceEvent.objects.filter(run=run).order_by("seq"))
    steps = [Step(action=a) for a in Action.objects.filter(run=run).order_by("turn", "call_index")]
    by_action = {str(s.action.pk): s for s in steps}
    for event in events:
        step = by_action.get(str(event.action_id)) if event.action_id else None
        if step is None:
            continue
        step.events.append(event)
        if event.kind == EventKind.GATE and not step.gate:
            step.gate = event.payload
    for step in steps:
        a = step.action
        if a.status == ActionStatus.SUCCEEDED and not a.readonly and a.result:
            step.receipt = a.result.get("data")
        if a.started_at:
            step.queued_ms = _ms(a.created_at, a.started_at)
    return RunStory(
        run=run,
        steps=steps,
        events=events,
        approvals=approval_requests_for_run(run_ref=str(run.pk)),
        decisions=list(AuditEntry.objects.filter(run_id=run.pk).select_related("actor")),
        verifications=[e for e in events if e.kind == EventKind.VERIFIED],
        trace_problems=trace_problems(run=run, events=events),
        total_ms=_ms(run.created_at, run.finished_at) if run.finished_at else None,
    )


def _ms(start: datetime, end: datetime) -> int:
    return max(0, round((end - start).total_seconds() * 1000))


def trace_problems(*, run: AgentRun, events: list[TraceEvent] | None = None) -> list[str]:
    """Why this run's trace does not reconstruct it (empty: it does). The sequence is gap-free
    from 1, starts with the run's start (or, for a kind without one, its call's gate), ends (for a finished run) in a terminal event that
    matches the run's status, and every call begins with its gate decision."""
    if events is None:
        events = list(TraceEvent.objects.filter(run=run).order_by("seq"))
    problems: list[str] = []
    seqs = [e.seq for e in events]
    if seqs != list(range(1, len(seqs) + 1)):
        problems.append(f"sequence has gaps or repeats: {seqs}")
    opening = EventKind.RUN_STARTED if rules(run).started_event else EventKind.GATE
    if not events or events[0].kind != opening:
        problems.append(f"does not start with {opening}")
    if run.is_terminal:
        last = events[-1] if events else None
        if last is None or last.kind != EventKind.RUN_FINISHED:
            problems.append("does not end in run_finished")
        elif last.payload.get("status") not in (None, run.status):
            problems.append(f"ends as {last.payload.get('status')} but the run is {run.status}")
    first_kind: dict[Any, str] = {}
    for event in events:
        if event.action_id is not None:
            first_kind.setdefault(event.action_id, event.kind)
    problems.extend(
        f"call {action_id} has no gate decision first"
        for action_id in Action.objects.filter(run=run).values_list("pk", flat=True)
        if first_kind.get(action_id) != EventKind.GATE
    )
    return problems
