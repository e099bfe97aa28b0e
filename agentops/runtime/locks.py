"""Every row lock of the runtime, in one order: the run first, then its action.

A transaction that needs both always locks the run first, so run-level work (a step, a cancel)
and action-level work (execution, reconciliation) never deadlock.
"""

from __future__ import annotations

from typing import Any

from agentops.models import Action, AgentRun


def lock_run(run_id: Any) -> AgentRun:
    """The run row, locked until the caller's transaction ends, with its subject loaded."""
    return AgentRun.objects.select_for_update(of=("self",)).select_related("subject").get(pk=run_id)


def lock_action(action_id: Any, *, run_id: Any = None) -> tuple[AgentRun, Action] | None:
    """The action's run, then the action, both locked; None if the action does not exist.
    A caller that knows the run saves the look-up."""
    if run_id is None:
        run_id = Action.objects.filter(pk=action_id).values_list("run_id", flat=True).first()
        if run_id is None:
            return None
    run = lock_run(run_id)
    action = Action.objects.select_for_update().get(pk=action_id)
    action.run = run
    return run, action
