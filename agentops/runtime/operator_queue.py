"""What waits for an operator. Each lookup is asked afresh: the queue shows what the tool says
now, not what it said when the call went unclear."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_lazy

from agentops.contract import ReceiptLookup, ReceiptStatus
from agentops.models import Action, ActionStatus, AgentRun, RunStatus
from agentops.runtime.reconcile import DECISION_LABELS, Decision, decisions_allowed, receipt_lookup

QUEUE_LIMIT = 50

LOOKUP_LABELS = {
    ReceiptStatus.FOUND: gettext_lazy("Found: a receipt exists under this key"),
    ReceiptStatus.ABSENT: gettext_lazy("Absent: proven that nothing was written under this key"),
    ReceiptStatus.UNKNOWN: gettext_lazy("Unknown: the lookup cannot tell"),
}


@dataclass(frozen=True)
class UnclearWrite:
    """A write whose outcome the reconciler could not settle, with the lookup asked now and the
    decisions that lookup supports."""

    action: Action
    lookup: ReceiptLookup
    allowed: frozenset[Decision]

    @property
    def lookup_label(self) -> str:
        return str(LOOKUP_LABELS[self.lookup.status])

    @property
    def decisions(self) -> list[tuple[str, str]]:
        """(value, label) of each decision the lookup supports, in a fixed order."""
        return [(d.value, str(DECISION_LABELS[d])) for d in Decision if d in self.allowed]


def actions_needing_human(*, limit: int = QUEUE_LIMIT) -> list[UnclearWrite]:
    """The oldest unclear writes first, each with its receipt lookup."""
    actions = (
        Action.objects.filter(status=ActionStatus.NEEDS_HUMAN)
        .select_related("run", "run__subject")
        .order_by("created_at")[:limit]
    )
    items = []
    for action in actions:
        lookup = receipt_lookup(action)
        allowed = decisions_allowed(lookup=lookup, run_terminal=action.run.is_terminal)
        items.append(UnclearWrite(action, lookup, allowed))
    return items


def actions_needing_human_count() -> int:
    return Action.objects.filter(status=ActionStatus.NEEDS_HUMAN).count()


def rollbacks_pending_count() -> int:
    return AgentRun.objects.filter(status=RunStatus.ROLLBACK_PENDING).count()
