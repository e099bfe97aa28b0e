"""The sections of the operators' queue, in the order the page shows them. A section is a
selector of its items, a count for the navigation and a template fragment that renders one item
(``item``) with its decision form; adding a kind of work to the queue is one entry here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy

from agentops import selectors
from agentops.selectors import runs_rollback_pending


@dataclass(frozen=True)
class QueueSection:
    key: str  # the section's id on the page
    title: str | Promise
    explanation: str | Promise
    template: str  # renders one ``item``
    items: Callable[[], list[Any]]
    count: Callable[[], int]


SECTIONS: list[QueueSection] = [
    QueueSection(
        key="unknown-outcomes",
        title=gettext_lazy("Unknown outcomes"),
        explanation=gettext_lazy(
            "Writes whose outcome the automatic reconciler could not settle. Each shows what the "
            "tool's lookup says under the call's idempotency key right now; a decision asks it "
            "again and is refused if the answer no longer supports it."
        ),
        template="console/operators/_unclear_write.html",
        items=selectors.actions_needing_human,
        count=selectors.actions_needing_human_count,
    ),
    QueueSection(
        key="rollbacks",
        title=gettext_lazy("Rollbacks that failed"),
        explanation=gettext_lazy(
            "Runs that could not finish and whose bookings could not all be released. Retrying "
            "asks each release's lookup first, so nothing is released twice."
        ),
        template="console/operators/_rollback.html",
        items=runs_rollback_pending,
        count=selectors.rollbacks_pending_count,
    ),
    QueueSection(
        key="paused-tools",
        title=gettext_lazy("Tools paused after repeated failures"),
        explanation=gettext_lazy(
            "A tool that failed several times in a short while is refused at once for a "
            "moment, so that people are not kept waiting on it; nothing is run meanwhile. It "
            "is tried again by itself when the pause ends. Nothing to decide here: check "
            "what the tool depends on."
        ),
        template="console/operators/_paused_tool.html",
        items=selectors.tools_paused,
        count=lambda: len(selectors.tools_paused()),
    ),
]


def queue_count() -> int:
    """How much waits for an operator, over every section (the navigation's count)."""
    return sum(section.count() for section in SECTIONS)
