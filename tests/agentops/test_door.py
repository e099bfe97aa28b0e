"""The engine's door is pinned: screens, the API, the live socket and MCP use these names and
nothing behind them (import-linter keeps the rest private). Changing a name here is a decision
(Temporal's tests/test_workflow_exports.py does the same for its SDK)."""

from __future__ import annotations

import pytest

from agentops import selectors, services

SERVICES = {
    "Decision",
    "DecisionResult",
    "LimiterUnavailableError",
    "MCP_STATE_TTL",
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
}

SELECTORS = {
    "MAX_REQUEST_CHARS",
    "ActionStatus",
    "AgentRun",
    "AuditFilters",
    "EventKind",
    "ExportFormat",
    "PendingRollback",
    "QUEUE_GROUP",
    "RowKind",
    "RunDetail",
    "RunKind",
    "RunOutcome",
    "RunStatus",
    "RunStory",
    "TERMINAL_RUN_STATUSES",
    "ScopeIn",
    "UnclearWrite",
    "actions_needing_human",
    "actions_needing_human_count",
    "approval_outcomes",
    "approval_recheck",
    "audit_details",
    "audit_export_chunks",
    "audit_row",
    "audit_rows",
    "drill_get",
    "drill_latest",
    "may_reconcile",
    "mcp_task_get",
    "mcp_tool_names",
    "mcp_tools",
    "mcp_user",
    "rollbacks_pending_count",
    "run_conversation_before",
    "run_detail_for_user",
    "run_events_after",
    "run_get_for_viewer",
    "run_group",
    "run_list_for_user",
    "run_story",
    "runs_rollback_pending",
    "tool_get",
    "tools_all",
    "tools_paused",
    "tools_visible_to",
}


@pytest.mark.parametrize(("door", "names"), [(services, SERVICES), (selectors, SELECTORS)])
def test_the_door_exports_exactly_its_pinned_names(door, names) -> None:
    assert set(door.__all__) == names
    missing = [name for name in names if not hasattr(door, name)]
    assert missing == []


def test_services_and_selectors_do_not_overlap() -> None:
    assert SERVICES.isdisjoint(SELECTORS)


def test_the_door_exports_every_public_function_it_defines() -> None:
    """A function written in a door module (not imported into it) is part of the door: it must
    be listed, or be private."""
    for door in (services, selectors):
        defined = {
            name
            for name, value in vars(door).items()
            if callable(value)
            and getattr(value, "__module__", None) == door.__name__
            and not name.startswith("_")
        }
        assert defined <= set(door.__all__), door.__name__
