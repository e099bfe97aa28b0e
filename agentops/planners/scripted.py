"""A model that says what a test scripted, turn by turn (stored on the run, so any worker can
replay it)."""

from __future__ import annotations

from typing import Any

from agentops.contract import ModelContext, Proposal, Step, StepOutcome


class ScriptedPlanner:
    name = "scripted"
    local = True  # answers in process, from the request and the history (Planner)

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = script

    def propose(self, ctx: ModelContext) -> Step:
        if ctx.turn > len(self.script):
            return Step(message="(end of script)", outcome=StepOutcome.DONE)
        step = self.script[ctx.turn - 1]
        return Step(
            proposals=[
                Proposal(p["tool"], p.get("arguments", {})) for p in step.get("proposals", [])
            ],
            message=step.get("message", ""),
            outcome=StepOutcome(step.get("outcome", "done")),
        )
