"""Putting work on the Celery queue. Called from inside transactions: each send waits for the
commit, so a worker never looks for rows that are not there yet."""

from __future__ import annotations

from typing import Any

from django.db import transaction


def enqueue_step(run_id: Any, turn: int) -> None:
    from agentops.tasks import run_step_task

    transaction.on_commit(lambda: run_step_task.delay(str(run_id), turn))


def enqueue_action(action_id: Any, countdown: float = 0) -> None:
    from agentops.tasks import execute_action_task

    transaction.on_commit(
        lambda: execute_action_task.apply_async(args=[str(action_id)], countdown=countdown or None)
    )


def enqueue_reconcile(action_id: Any) -> None:
    from agentops.tasks import reconcile_action_task

    transaction.on_commit(lambda: reconcile_action_task.delay(str(action_id)))
