"""Celery tasks: ids in, one service call each. Delivery is at least once; the services are
idempotent (they claim rows by status under a lock). The runtime sends these by name
(agentops.runtime.queue), so nothing imports this module but Celery."""

from __future__ import annotations

from celery import shared_task

from agentops.runtime import approval, drills, reconcile, recorder, runs, steps, sweeper


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_step_task(run_id: str, turn: int) -> None:
    steps.run_step(run_id, turn)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def execute_action_task(action_id: str, run_id: str | None = None) -> None:
    recorder.action_execute(action_id, run_id=run_id)
    approval.outcome_announce(action_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def reconcile_action_task(action_id: str) -> None:
    reconcile.action_reconcile(action_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def reconcile_resume_task(action_id: str) -> None:
    reconcile.action_reconcile_resume(action_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def approval_settled_task(action_id: str, run_id: str | None = None) -> None:
    runs.action_approval_settled(action_id, run_id=run_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def approval_refresh_task(action_id: str) -> None:
    runs.action_approval_refresh(action_id)


@shared_task(acks_late=True)
def sweep_task() -> dict[str, int]:
    return sweeper.sweep()


@shared_task(acks_late=True, reject_on_worker_lost=True)
def drill_run_task(drill_id: str) -> None:
    drills.drill_execute(drill_id)


@shared_task(acks_late=True)
def expire_trace_payloads_task() -> dict[str, int]:
    return sweeper.trace_payloads_expire()
