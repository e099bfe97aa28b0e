"""The engine's front door for writes. Screens (``console``), the JSON API, the live socket and
MCP change runtime state only through these names; everything behind them
(``agentops.runtime``, ``agentops.planners``, the models) is private to this door, the door for
reads (``agentops.selectors``), the Celery tasks, the admin and the app config. An
import-linter contract keeps it so, and ``tests/agentops/test_door.py`` pins the names: a change
to them is a decision, not an accident.

- Runs: ``run_start`` (an assistant run from a person's request), ``run_cancel``.
- A governed tool call of any channel (JSON API, booking screens through the contract's
  governor, MCP): ``tool_call_governed``; an MCP ``tools/call``: ``mcp_call``, and the end of an
  MCP session: ``mcp_session_end``. A 2026-07-28 client's wait for an approver:
  ``mcp_state_mint`` / ``mcp_state_redeem`` (a single-use requestState), ``mcp_task_create`` /
  ``mcp_task_cancel`` (a task), and how long a state lives, ``MCP_STATE_TTL``.
- Human decisions on runtime state: ``action_reconcile_decide`` (an unclear write),
  ``rollback_retry_decide`` (a rollback that failed), ``drill_start``, ``audit_export_record``.
- The live socket's mark that someone watches a run: ``run_watch`` / ``run_unwatch``.
- Tools that join at start-up from outside the domain apps (the MCP gateway):
  ``tool_register`` / ``tool_unregister``.
"""

from __future__ import annotations

from agentops.runtime.auditlog import audit_export_record
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.drills import drill_start
from agentops.runtime.mcp_sessions import mcp_call, mcp_session_end
from agentops.runtime.mcp_waits import STATE_TTL as MCP_STATE_TTL
from agentops.runtime.mcp_waits import state_mint as mcp_state_mint
from agentops.runtime.mcp_waits import state_redeem as mcp_state_redeem
from agentops.runtime.mcp_waits import task_cancel as mcp_task_cancel
from agentops.runtime.mcp_waits import task_create as mcp_task_create
from agentops.runtime.ratelimit import LimiterUnavailableError
from agentops.runtime.reconcile import (
    Decision,
    DecisionResult,
    action_reconcile_decide,
    rollback_retry_decide,
)
from agentops.runtime.registry import register as tool_register
from agentops.runtime.registry import unregister as tool_unregister
from agentops.runtime.runs import (
    RunKeyReused,
    RunRateLimited,
    RunRequestError,
    run_cancel,
    run_start,
)
from agentops.runtime.trace import unwatch as run_unwatch
from agentops.runtime.trace import watch as run_watch

__all__ = [
    "MCP_STATE_TTL",
    "Decision",
    "DecisionResult",
    "LimiterUnavailableError",
    "RunKeyReused",
    "RunRateLimited",
    "RunRequestError",
    "action_reconcile_decide",
    "audit_export_record",
    "drill_start",
    "mcp_call",
    "mcp_session_end",
    "mcp_state_mint",
    "mcp_state_redeem",
    "mcp_task_cancel",
    "mcp_task_create",
    "rollback_retry_decide",
    "run_cancel",
    "run_start",
    "run_unwatch",
    "run_watch",
    "tool_call_governed",
    "tool_register",
    "tool_unregister",
]
