"""Every row lock of the runtime, in one order: the run first, then its action.

A transaction that needs both always locks the run first, so run-level work (a step, a cancel)
and action-level work (execution, reconciliation) never deadlock.
"""

from __future__ import annotations

from typing import Any

from agentops.models import Action, AgentRun


def _runs_locked():
    return AgentRun.objects.select_for_update(of=("self",)).select_related("subject")


def lock_run(run_id: Any) -> AgentRun:
    """The run row, locked until the caller's transaction ends, with its subject loaded."""
    return _runs_locked().get(pk=run_id)


def lock_action(action_id: Any, *, run_id: Any = None) -> tuple[AgentRun, Action] | None:
    """The action's run, then the action, both locked; None if the action does not exist.
    A caller that knows the run saves the look-up."""
    if run_id is None:
        run_id = Action.objects.filter(pk=action_id).values_list("run_id", flat=True).first()
        if run_id is None:
            return None
    run = _runs_locked().filter(pk=run_id).first()
    action = (
        Action.objects.select_for_update().filter(pk=action_id, run_id=run_id).first()
        if run is not None
        else None
    )
    if action is None:  # no such action, or not of that run
        return None
    action.run = run
    return run, action
