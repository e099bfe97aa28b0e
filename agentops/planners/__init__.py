"""Model adapters. A run's ``model_name`` picks one: the domain's offline planner (``rules``,
from its Assistant hook), the scripted model (tests, drills) or an OpenAI-compatible endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentops import registry
from agentops.contract import Planner

if TYPE_CHECKING:
    from agentops.models import AgentRun


def planner_for(run: AgentRun) -> Planner:
    if run.model_name == "scripted":
        from agentops.planners.scripted import ScriptedPlanner

        return ScriptedPlanner(run.model_script)
    if run.model_name == "openai":
        from agentops.planners.openai_adapter import from_settings

        return from_settings()
    return registry.assistant().planner()
