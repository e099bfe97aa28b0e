"""The one place work is put on the Celery queue, or continued in place. Tasks are sent by
name, so the runtime never imports the tasks module (which imports the runtime): the module
graph has no cycle.

Each send waits for the caller's commit, so a worker never looks for rows that are not there.
A worker that has just finished one piece of a run continues with the next one itself
(``continue_*``) instead of a round trip through the broker: the run's rows say what is next,
so a worker that dies in between leaves queued work the sweeper re-enqueues, as for a lost
message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import current_app
from django.db import transaction

STEP = "agentops.tasks.run_step_task"
EXECUTE = "agentops.tasks.execute_action_task"
RECONCILE = "agentops.tasks.reconcile_action_task"
RECONCILE_RESUME = "agentops.tasks.reconcile_resume_task"
APPROVAL_SETTLED = "agentops.tasks.approval_settled_task"
APPROVAL_REFRESH = "agentops.tasks.approval_refresh_task"
DRILL = "agentops.tasks.drill_run_task"


def _task(name: str) -> Any:
    """The registered task ``name``; outside a worker, Celery's autodiscovery runs first."""
    if name not in current_app.tasks:
        current_app.loader.import_default_modules()
    return current_app.tasks[name]


def _send(name: str, args: list[Any], countdown: float | None = None) -> None:
    app = current_app
    if app.conf.task_always_eager:  # send_task ignores it; bench/profile_run.py relies on it
        transaction.on_commit(lambda: _task(name).apply(args=args))
        return
    transaction.on_commit(lambda: app.send_task(name, args=args, countdown=countdown))


def _continue(name: str, args: list[Any]) -> None:
    """Run task ``name`` here, right after the caller's commit. Its failure is logged, not
    raised into the work that has just committed."""
    transaction.on_commit(lambda: _task(name)(*args), robust=True)


def continue_here(fn: Callable[..., None], *args: Any) -> None:
    """Go on with ``fn(*args)`` in this process after the caller's commit (work already
    recorded as started: a worker that dies before it leaves a running action whose lease the
    sweeper settles)."""
    transaction.on_commit(lambda: fn(*args), robust=True)


def continue_step(run_id: Any, turn: int) -> None:
    _continue(STEP, [str(run_id), turn])


def continue_action(action_id: Any, *, run_id: Any = None) -> None:
    _continue(EXECUTE, [str(action_id), *([str(run_id)] if run_id else [])])


def enqueue_step(run_id: Any, turn: int) -> None:
    _send(STEP, [str(run_id), turn])


def enqueue_action(action_id: Any, countdown: float = 0, *, run_id: Any = None) -> None:
    """``run_id``, when the caller knows it, saves the worker a look-up."""
    _send(EXECUTE, [str(action_id), *([str(run_id)] if run_id else [])], countdown or None)


def enqueue_approval_settled(action_id: Any, *, run_id: Any = None) -> None:
    """``run_id``, when the caller knows it, saves the worker a look-up."""
    _send(APPROVAL_SETTLED, [str(action_id), *([str(run_id)] if run_id else [])])


def enqueue_approval_refresh(action_id: Any) -> None:
    _send(APPROVAL_REFRESH, [str(action_id)])


def enqueue_reconcile(action_id: Any) -> None:
    _send(RECONCILE, [str(action_id)])


def enqueue_drill(drill_id: Any) -> None:
    _send(DRILL, [str(drill_id)])


def enqueue_reconcile_resume(action_id: Any) -> None:
    """An operator settled the action from a web request: the run goes on in a worker."""
    _send(RECONCILE_RESUME, [str(action_id)])
