"""The one place work is put on the Celery queue. Tasks are sent by name, so the runtime never
imports the tasks module (which imports the runtime): the module graph has no cycle.

Each send waits for the caller's commit, so a worker never looks for rows that are not there.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.db import transaction

STEP = "agentops.tasks.run_step_task"
EXECUTE = "agentops.tasks.execute_action_task"
RECONCILE = "agentops.tasks.reconcile_action_task"


def _send(name: str, args: list[Any], countdown: float | None = None) -> None:
    transaction.on_commit(lambda: current_app.send_task(name, args=args, countdown=countdown))


def enqueue_step(run_id: Any, turn: int) -> None:
    _send(STEP, [str(run_id), turn])


def enqueue_action(action_id: Any, countdown: float = 0) -> None:
    _send(EXECUTE, [str(action_id)], countdown or None)


def enqueue_reconcile(action_id: Any) -> None:
    _send(RECONCILE, [str(action_id)])
