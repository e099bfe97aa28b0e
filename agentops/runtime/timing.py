"""Budgets and timing constants, in one place, with how they relate.

- A tool's timeout is 3x its estimated latency (ToolMeta.timeout_s). A running action holds a
  lease of timeout + LEASE_GRACE; the sweeper (every AGENT_SWEEP_SECONDS) takes over an expired
  lease, so a dead worker's call is noticed within timeout + grace + one sweep period.
- Celery's visibility timeout (settings) must outlast the longest task: the longest tool timeout
  plus retries' backoff (MAX_BACKOFF x MAX_YELLOW_RETRIES) is far below it. The backoff is
  scaled by settings.AGENT_RETRY_BACKOFF_SCALE (1; tests set 0).
- STALE_AFTER > one sweep period > a normal hop: only work nobody is doing is re-enqueued.
- ABANDONED_CLAIM_AFTER > the longest tool timeout + LEASE_GRACE: a live call's claim is never
  taken for abandoned.
- A run's deadline (Budgets.deadline_s) bounds every proposal: an action does not execute after
  its proposal deadline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any


@dataclass(frozen=True)
class Budgets:
    max_turns: int = 8
    max_proposals: int = 12
    max_tool_calls: int = 12
    deadline_s: int = 180

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Budgets:
        known = {k: int(v) for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


DEFAULT_BUDGETS = Budgets()
DIRECT_BUDGETS = Budgets(max_turns=1, max_proposals=1, max_tool_calls=1, deadline_s=60)
# One MCP session (a run of kind mcp): every tools/call is a turn; the deadline bounds the
# session and every approval asked in it.
MCP_SESSION_BUDGETS = Budgets(
    max_turns=200, max_proposals=200, max_tool_calls=200, deadline_s=8 * 3600
)

LOOP_LIMIT = 5  # the same call proposed this many times in a run aborts it
MAX_YELLOW_RETRIES = 3  # transient failures: attempts 2..4
MAX_BACKOFF_S = 2.0
MAX_RECONCILE_RETRIES = 3  # re-runs of a write proven absent
LEASE_GRACE = timedelta(seconds=5)
STALE_AFTER = timedelta(seconds=20)
ABANDONED_CLAIM_AFTER = timedelta(minutes=2)
# An operator's decision on an unclear write gives the action and its run this long to finish
# (as an approval does): the decision may come long after the run's own deadline.
OPERATOR_DECISION_WINDOW = timedelta(minutes=5)
IDEMPOTENCY_TTL = timedelta(days=7)
FAULT_PAUSE_LIMIT_S = 30  # an injected pause never holds a worker longer than this
RATE_WINDOW_S = 60
