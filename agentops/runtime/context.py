"""Who and what a call runs as."""

from __future__ import annotations

from agentops.contract import CallContext, Delegation
from agentops.models import Action, AgentRun


def action_context(run: AgentRun, action: Action) -> CallContext:
    """Who and what a call of this action runs as: the run's subject, never the model's say."""
    return CallContext(
        user=run.subject,
        run_id=str(run.pk),
        action_id=str(action.pk),
        idempotency_key=action.idempotency_key,
        delegation=Delegation.from_json(run.delegation),
    )
