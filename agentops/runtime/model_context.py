"""The model's view of a run, built per step (small, and never the audit log or credentials),
and the model adapter that a run's ``model_name`` picks."""

from __future__ import annotations

from django.utils import timezone

from accounts.selectors import user_roles
from agentops.contract import (
    ConversationTurn,
    Delegation,
    ModelContext,
    Observation,
    Planner,
    exports,
)
from agentops.models import Action, AgentRun
from agentops.runtime import registry
from agentops.runtime.store import run_actions


def build_context(
    run: AgentRun, *, roles: frozenset[str] | None = None, actions: list[Action] | None = None
) -> ModelContext:
    """``roles``, ``actions``: the subject's roles and the run's actions if the caller has read
    them for this step already."""
    user = run.subject
    delegation = Delegation.from_json(run.delegation)
    tools = [
        exports.openai_function(s)
        for s in registry.visible_to(user_roles(user=user) if roles is None else roles)
        if s.name in delegation.tools
    ]
    history = [
        Observation(turn=a.turn, tool=a.tool, arguments=a.params, result=a.result)
        for a in (run_actions(run) if actions is None else actions)
        if a.result is not None
    ]
    return ModelContext(
        goal=run.goal,
        language=run.language,
        now=timezone.localtime().isoformat(),
        subject={
            "employee_id": getattr(user, "employee_id", "") or "",
            "department": getattr(user, "department", ""),
        },
        delegation=delegation,
        tools=tools,
        history=history,
        turn=run.turn,
        instructions=tuple(registry.assistant().model_instructions()),
        conversation=tuple(ConversationTurn.from_json(t) for t in run.conversation or ()),
    )


def planner_for(run: AgentRun) -> Planner:
    """The run's model: the domain's offline planner (``rules``, from its Assistant hook), the
    scripted model (tests, drills) or an OpenAI-compatible endpoint."""
    if run.model_name == "scripted":
        from agentops.planners.scripted import ScriptedPlanner

        return ScriptedPlanner(run.model_script)
    if run.model_name == "openai":
        from agentops.planners.openai_adapter import from_settings

        return from_settings(reader=registry.assistant())
    return registry.assistant().planner()
