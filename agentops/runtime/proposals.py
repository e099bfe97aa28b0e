"""A proposed call becomes an Action: gated, recorded with its verdict, keyed if it writes.

The same function records the proposals of assistant runs and of direct calls (API, screens,
MCP), so every governed call has the same rows and the same trace events.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agentops.contract import CallContext, ToolSpec, call_reads, canonical_json, message_json
from agentops.contract.limits import refused_input, safe_text
from agentops.models import Action, ActionStatus, AgentRun, EventKind, TraceEvent
from agentops.runtime import approval, gate
from agentops.runtime.transitions import action_create

_STATUS = {
    gate.GateDecision.EXECUTE: ActionStatus.QUEUED,
    gate.GateDecision.APPROVAL: ActionStatus.WAITING_APPROVAL,
    gate.GateDecision.REFUSE: ActionStatus.REJECTED,
    gate.GateDecision.ABORT: ActionStatus.REJECTED,
}


COMPENSATE_SUFFIX = ":compensate"


def compensation_intent(spec: ToolSpec, key: str) -> dict[str, str]:
    """The undo a write is registered with before it runs ({} when its tool declares none):
    the compensating tool and its key, ``<write's key>:compensate`` (runtime.saga runs it)."""
    if spec.compensate is None or not key:
        return {}
    return {"tool": spec.compensate.tool, "key": f"{key}{COMPENSATE_SUFFIX}"}


def call_digest(tool: str, arguments: Any) -> str:
    """The digest of a proposed call as the model sent it (loop detection)."""
    raw = arguments if isinstance(arguments, dict) else {"_arguments": arguments}
    text = canonical_json({"tool": tool, "params": raw})
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()  # lone surrogates


def _version(value: Any) -> int | None:
    """An environment version the column can hold (a schema may allow more than int4)."""
    return value if isinstance(value, int) and -(2**31) <= value < 2**31 else None


@call_reads()
def proposal_record(
    *,
    run: AgentRun,
    ctx: CallContext,
    roles: frozenset[str],
    turn: int,
    index: int,
    tool: str,
    arguments: Any,
    writes_so_far: int,
    usage: gate.RunUsage | None = None,
    key: str | None = None,
    run_fields: tuple[str, ...] = (),
    before: TraceEvent | None = None,
) -> tuple[gate.Verdict, Action]:
    """Gate one proposal and record it as an Action (refused ones too) with a ``gate`` event
    (which saves ``run_fields`` of the run too; ``before``: an event of the run that goes in
    just before it, trace.run_event). The caller holds the run lock. Writes get the host's
    idempotency key: ``key`` if given, else ``run:turn:index``.

    The gate, the approval's opening and its binding read the tool's state once between them
    (``call_reads``, a scope of each call of this function)."""
    verdict = gate.screen(
        tool, arguments, ctx=ctx, roles=roles, writes_so_far=writes_so_far, usage=usage
    )
    spec, args = verdict.spec, verdict.args
    # A refused call keeps a digest of its input, never the input (a megabyte, or bytes that
    # jsonb cannot hold); an accepted one its validated parameters.
    params = args.model_dump(mode="json") if args is not None else refused_input(arguments)
    action = Action(
        run=run,
        turn=turn,
        call_index=index,
        tool=safe_text(tool, 64),
        params=params,
        params_digest=call_digest(tool, arguments),
        readonly=spec.meta.readonly if spec else True,
        observed_version=_version(params.get("expected_version")),
        risk=verdict.risk.value if verdict.risk else "",
        risk_reasons=[message_json(r) for r in verdict.risk_reasons],
        proposal_deadline=run.deadline,
    )
    status = _STATUS[verdict.decision]
    if status != ActionStatus.REJECTED and spec is not None:
        if not spec.meta.readonly and spec.meta.enforced_idempotent:
            action.idempotency_key = key or f"{run.pk}:{turn}:{index}"
            action.compensation = compensation_intent(spec, action.idempotency_key)
    else:
        # REJECTED: the gate's every refusal and abort carries its error (gate._refuse).
        action.result = verdict.error.envelope()  # type: ignore[union-attr]
    if status == ActionStatus.WAITING_APPROVAL and spec is not None and args is not None:
        # The approval's deadline goes in with the action, and the run's, extended to it, with
        # the gate event's statement (approval.request_open then saves neither).
        run_fields = (*run_fields, *approval.waiting_deadlines(run, action, spec, args))
    action_create(
        action,
        status,
        event=EventKind.GATE,
        run=run,
        payload={
            "tool": action.tool,
            "call_index": index,
            "decision": verdict.decision.value,
            "check": verdict.check.value,
            "risk": action.risk,
            "risk_reasons": action.risk_reasons,
            "policy_version": run.policy_version,
            "idempotency_key": action.idempotency_key,
            **({"compensation": action.compensation} if action.compensation else {}),
            **({"refusal": action.result} if action.result else {}),
        },
        run_fields=run_fields,
        before=before,
    )
    if status == ActionStatus.WAITING_APPROVAL:
        # Only the gate's last check sends a call to approval, with its spec and arguments.
        approval.request_open(run, action, spec, args, new_action=True)  # type: ignore[arg-type]
    return verdict, action
