"""Every row lock of the runtime, in one order: the run first, then its action.

A transaction that needs both always locks the run first, so run-level work (a step, a cancel)
and action-level work (execution, reconciliation) never deadlock. (The statements are
agentops.runtime.store': prepared statements, not the ORM's select_for_update; the run and its action
are locked in that order by one statement.)
"""

from __future__ import annotations

from typing import Any

from agentops.models import Action, AgentRun
from agentops.runtime.store import run_action_locked, run_with_subject


def lock_run(run_id: Any) -> AgentRun:
    """The run row, locked until the caller's transaction ends, with its subject loaded."""
    run = run_with_subject(run_id, lock=True)
    if run is None:
        raise AgentRun.DoesNotExist(f"no run {run_id}")
    return run


def lock_action(action_id: Any, *, run_id: Any = None) -> tuple[AgentRun, Action] | None:
    """The action's run, then the action, both locked; None if the action does not exist (or
    is not of ``run_id``). A caller that knows the run saves the look-up."""
    if run_id is None:
        run_id = Action.objects.filter(pk=action_id).values_list("run_id", flat=True).first()
        if run_id is None:
            return None
    return run_action_locked(run_id, action_id)
