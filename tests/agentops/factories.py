"""Runs, calls and decisions written straight into the tables, for the audit log's tests."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from django.utils import timezone

from accounts.models import AuditAction
from accounts.services import audit_record
from agentops.models import Action, AgentRun, EventKind
from agentops.runtime.trace import trace_append

_index = itertools.count()


def run_create(user, *, goal: str = "Book a room tomorrow 14:00-15:00", status: str = "succeeded"):
    now = timezone.now()
    run = AgentRun.objects.create(
        subject=user,
        goal=goal,
        model_name="rules",
        policy_version="p1",
        delegation={"tools": ["find_available_rooms", "reserve_room"]},
        deadline=now + timedelta(minutes=3),
        status=status,
        finished_at=now if status in ("succeeded", "failed", "cancelled") else None,
    )
    trace_append(run=run, kind=EventKind.RUN_STARTED, payload={"goal": goal})
    return run


def action_create(
    run,
    *,
    tool: str = "find_available_rooms",
    status: str = "succeeded",
    risk: str = "LOW",
    **extra: Any,
):
    action = Action.objects.create(
        run=run,
        turn=1,
        call_index=next(_index),
        tool=tool,
        params=extra.pop("params", {"room_id": "R7"}),
        params_digest=extra.pop("params_digest", "d"),
        readonly=tool != "reserve_room",
        status=status,
        risk=risk,
        **extra,
    )
    trace_append(
        run=run, kind=EventKind.GATE, action=action, payload={"decision": "execute", "tool": tool}
    )
    return action


def decision_create(
    user, *, run=None, action=AuditAction.APPROVAL_APPROVED, reason="Board meeting"
):
    return audit_record(
        actor=user,
        action=action,
        target="action:x",
        run_id=run.pk if run else None,
        detail={"reason": reason},
    )
