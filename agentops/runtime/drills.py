"""Drills: the domain's trajectories rehearsed in its sandbox, through the real worker.

``drill_start`` (an admin pressed the button) records a DrillRun, audits it and sends one task;
the task (``drill_execute``) prepares the sandbox, starts each drill's runs with their injected
faults, waits for them (runs execute on other worker slots), checks that every trace
reconstructs, asks the drill's own check, and stores the result after each drill so the page
shows progress. One drill run at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from accounts.models import AuditAction, User
from accounts.services import audit_record
from agentops.contract import Drill, DrillCall, DrillOutcome, DrillRunPlan
from agentops.models import (
    TERMINAL_RUN_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    DrillRun,
    DrillStatus,
)
from agentops.runtime import registry
from agentops.runtime.auditlog import parse_uuid
from agentops.runtime.invoke import release_key
from agentops.runtime.queue import enqueue_drill
from agentops.runtime.redis_client import get_redis
from agentops.runtime.runs import RunRateLimited, run_start
from agentops.runtime.story import trace_problems

log = logging.getLogger(__name__)

RUN_TIMEOUT_S = 60.0  # one drill run, start to terminal
HOLD_TIMEOUT_S = 20.0  # a held call to start
# A drill run not finished after this was abandoned by its worker: a new press may start.
ABANDONED_AFTER = timedelta(minutes=5)
_LOCK = 7_420_001  # advisory lock: one drill run starts at a time


@transaction.atomic
def drill_start(*, user: User) -> DrillRun:
    """Start a drill run for ``user`` (an admin), audited; or return the one under way."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
    under_way = DrillRun.objects.filter(
        status__in=[DrillStatus.QUEUED, DrillStatus.RUNNING]
    ).first()
    if under_way is not None:
        if timezone.now() - under_way.created_at < ABANDONED_AFTER:
            return under_way
        under_way.status, under_way.error = DrillStatus.FAILED, "abandoned by its worker"
        under_way.finished_at = timezone.now()
        under_way.save(update_fields=["status", "error", "finished_at"])
    drill_run = DrillRun.objects.create(started_by=user)
    audit_record(actor=user, action=AuditAction.DRILL_RUN, target=f"drill:{drill_run.pk}")
    enqueue_drill(drill_run.pk)
    return drill_run


def drill_execute(drill_id: str) -> None:
    """Run every drill of every sandbox and record the results (the worker task's body)."""
    updated = DrillRun.objects.filter(pk=drill_id, status=DrillStatus.QUEUED).update(
        status=DrillStatus.RUNNING
    )
    if not updated:
        return  # finished, or another delivery of this task is running it
    results: list[dict[str, Any]] = []
    try:
        for sandbox in registry.sandboxes():
            sandbox.prepare()
            for drill in sandbox.drills(now=timezone.now()):
                results.append(_rehearse(drill))
                DrillRun.objects.filter(pk=drill_id).update(results=results)
        passed = bool(results) and all(r["passed"] for r in results)
        status, error = (DrillStatus.PASSED if passed else DrillStatus.FAILED), ""
        if not results:
            error = "no sandbox is installed"
    except Exception as exc:  # a drill must end in a visible state, whatever broke
        log.exception("drill run %s broke", drill_id)
        status, error = DrillStatus.FAILED, f"{type(exc).__name__}: {exc}"
    DrillRun.objects.filter(pk=drill_id).update(
        status=status, results=results, error=error, finished_at=timezone.now()
    )


def _rehearse(drill: Drill) -> dict[str, Any]:
    problems: list[str] = []
    outcomes: list[DrillOutcome] = []
    runs: list[dict[str, Any]] = []
    for plan in drill.plans:
        run = _run(drill, plan, problems)
        if run is None:
            continue
        trace = trace_problems(run=run)
        problems.extend(f"trace: {p}" for p in trace)
        outcome = _outcome(run)
        outcomes.append(outcome)
        runs.append(
            {
                "id": str(run.pk),
                "user": plan.user.username,
                "status": run.status,
                "reply": run.reply,
                "trace_ok": not trace,
                "calls": [
                    f"{c.tool}: {c.status}" + (f" ({c.reason})" if c.reason else "")
                    for c in outcome.calls
                ],
            }
        )
    rows = drill.rows()
    if len(outcomes) == len(drill.plans):
        problems.extend(drill.check(outcomes, rows))
    return {
        "key": drill.key,
        "title": drill.title,
        "expectation": drill.expectation,
        "runs": runs,
        "rows": rows,
        "trace_ok": bool(runs) and all(r["trace_ok"] for r in runs),
        "passed": not problems,
        "problems": problems,
    }


def _run(drill: Drill, plan: DrillRunPlan, problems: list[str]) -> AgentRun | None:
    try:
        run = run_start(
            user=plan.user,
            request_text=plan.request,
            faults=list(plan.faults),
            model=plan.model,
            script=list(plan.script) or None,
        )
    except (ValueError, RunRateLimited) as exc:
        problems.append(f"the run could not start: {exc!r}")
        return None
    if plan.hold_tool:
        held = _wait(
            lambda: Action.objects.filter(
                run=run, tool=plan.hold_tool, status=ActionStatus.RUNNING
            ).exists(),
            HOLD_TIMEOUT_S,
        )
        if held and drill.meanwhile is not None:
            drill.meanwhile()
        elif not held:
            problems.append(f"{plan.hold_tool} never started within {HOLD_TIMEOUT_S:.0f}s")
        get_redis().set(release_key(str(run.pk)), "1", ex=300)
    finished = _wait(
        lambda: AgentRun.objects.filter(pk=run.pk, status__in=TERMINAL_RUN_STATUSES).first(),
        RUN_TIMEOUT_S,
    )
    if finished is None:
        run.refresh_from_db()
        problems.append(f"the run was still {run.status} after {RUN_TIMEOUT_S:.0f}s")
        return run
    return finished


def _wait(predicate: Callable[[], Any], timeout: float) -> Any:
    """The predicate's first truthy value, or None at the timeout (the caller reports it)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value or None
        time.sleep(0.05)


def _outcome(run: AgentRun) -> DrillOutcome:
    calls = []
    for a in run.actions.order_by("turn", "call_index"):
        result = a.result or {}
        calls.append(
            DrillCall(
                tool=a.tool,
                status=a.status,
                attempts=a.attempts,
                reason="" if result.get("ok") else str(result.get("reason") or ""),
                idempotency_key=a.idempotency_key,
                data=result.get("data") if result.get("ok") else None,
            )
        )
    kinds = list(run.events.order_by("seq").values_list("kind", flat=True))
    return DrillOutcome(
        status=run.status, outcome=run.outcome, reply=run.reply, calls=calls, event_kinds=kinds
    )


def drill_latest() -> DrillRun | None:
    return DrillRun.objects.select_related("started_by").first()


def drill_get(*, drill_id: str) -> DrillRun | None:
    pk = parse_uuid(drill_id)
    return DrillRun.objects.select_related("started_by").filter(pk=pk).first() if pk else None
