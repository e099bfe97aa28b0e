"""The tool contract: the only module of the runtime a domain app imports.

Dependency-free on purpose (pydantic and the standard library only; import-linter keeps Django
out): tools, the result envelope, receipts, the delegation, the assistant hook and drills.
"""

from __future__ import annotations

from agentops.contract.delegation import Delegation, RequestReading, ScopeError, ScopeFields
from agentops.contract.drills import Drill, DrillCall, DrillOutcome, DrillRunPlan, Sandbox
from agentops.contract.envelope import (
    LostReceiptError,
    Reason,
    Signal,
    ToolError,
    canonical_json,
    failure,
    success,
)
from agentops.contract.governance import (
    broadcast,
    broadcast_listen,
    broadcast_unlisten,
    governed_call,
    install_broadcaster,
    install_governor,
    on_run_finished,
    run_finished_announce,
)
from agentops.contract.paging import envelope_bytes, is_page, page_fitted
from agentops.contract.planning import (
    Assistant,
    ConversationTurn,
    ModelContext,
    Observation,
    Planner,
    Proposal,
    ReplyKind,
    Step,
    StepOutcome,
)
from agentops.contract.reads import call_reads, read_once
from agentops.contract.tools import (
    CallContext,
    Compensation,
    Handler,
    Message,
    ReceiptLookup,
    ReceiptStatus,
    Risk,
    SideEffect,
    ToolDescription,
    ToolMeta,
    ToolSpec,
    Verification,
    message_json,
    message_text,
)

__all__ = [
    "Assistant",
    "CallContext",
    "Compensation",
    "ConversationTurn",
    "Delegation",
    "Drill",
    "DrillCall",
    "DrillOutcome",
    "DrillRunPlan",
    "Handler",
    "LostReceiptError",
    "Message",
    "ModelContext",
    "Observation",
    "Planner",
    "Proposal",
    "Reason",
    "ReceiptLookup",
    "ReceiptStatus",
    "ReplyKind",
    "RequestReading",
    "Risk",
    "Sandbox",
    "ScopeError",
    "ScopeFields",
    "SideEffect",
    "Signal",
    "Step",
    "StepOutcome",
    "ToolDescription",
    "ToolError",
    "ToolMeta",
    "ToolSpec",
    "Verification",
    "broadcast",
    "broadcast_listen",
    "broadcast_unlisten",
    "call_reads",
    "canonical_json",
    "envelope_bytes",
    "failure",
    "governed_call",
    "install_broadcaster",
    "install_governor",
    "is_page",
    "message_json",
    "message_text",
    "on_run_finished",
    "page_fitted",
    "read_once",
    "run_finished_announce",
    "success",
]
