"""A single governed tool call made directly (JSON API, MCP): the same gate, idempotency and
trace as a run's calls, without a model. Each call is recorded as a one-action run.

The bookkeeping is the idempotency claim before a write and one statement after the call, so
that governance costs a small multiple of the call itself; see bench/runtime_overhead.py.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from accounts.selectors import user_roles
from agentops import gate
from agentops.contract import UNKNOWN_OUTCOME, CallContext, SideEffect, ToolError, failure
from agentops.execution import invoke
from agentops.idempotency import idempotency_claim, request_digest
from agentops.queueing import enqueue_reconcile
from agentops.runs import POLICY_VERSION

# Everything about the call is recorded in one statement once it has ended. Before a write
# starts, its pending intent is the idempotency record (key, digest, subject, tool): a crash in
# between leaves that record in progress, and the sweeper settles it by the tool's receipt lookup.
_RECORD_SQL = """
WITH run AS (
    INSERT INTO agentops_agentrun
           (id, subject_id, goal, language, model_name, delegation, budgets, policy_version, faults,
            model_script, status, outcome, reply, turn, proposals, tool_calls, event_seq, deadline,
            created_at, updated_at, finished_at)
    VALUES (%(run)s, %(user)s, %(goal)s, 'en', 'direct', '{}', '{}', %(policy)s, '[]', '[]',
            %(run_status)s::varchar, %(outcome)s, '', 1, 1, 1, 4, %(deadline)s, %(started_at)s, now(),
            CASE WHEN %(run_status)s::varchar = 'reconciling' THEN NULL ELSE now() END)
), action AS (
    INSERT INTO agentops_action
           (id, run_id, turn, call_index, tool, params, params_digest, readonly, risk, risk_reasons,
            idempotency_key, status, attempts, result, started_at, finished_at, duration_ms, task_id,
            created_at)
    VALUES (%(action)s, %(run)s, 1, 0, %(tool)s, %(params)s, %(digest)s, %(readonly)s, %(risk)s,
            %(risk_reasons)s, %(key)s, %(status)s, 1, %(result)s, %(started_at)s, now(), %(duration)s,
            '', %(started_at)s)
), completed AS (
    UPDATE agentops_idempotencyrecord
       SET status = 'completed', response = %(result)s, completed_at = now()
     WHERE key = %(key)s AND %(complete)s
), released AS (
    DELETE FROM agentops_idempotencyrecord
     WHERE key = %(key)s AND %(release)s AND status = 'in_progress'
)
INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
VALUES (%(run)s, 1, 'gate', %(action)s, %(gate)s, %(started_at)s),
       (%(run)s, 2, 'execution_started', %(action)s, %(started)s, %(started_at)s),
       (%(run)s, 3, 'execution_finished', %(action)s, %(finished)s, now()),
       (%(run)s, 4, 'run_finished', NULL, %(run_finished)s, now())
"""

_REFUSED_SQL = """
WITH run AS (
    INSERT INTO agentops_agentrun
           (id, subject_id, goal, language, model_name, delegation, budgets, policy_version, faults,
            model_script, status, outcome, reply, turn, proposals, tool_calls, event_seq, deadline,
            created_at, updated_at, finished_at)
    VALUES (%(run)s, %(user)s, %(goal)s, 'en', 'direct', '{}', '{}', %(policy)s, '[]', '[]',
            'failed', %(outcome)s, '', 1, 1, 0, 1, now(), now(), now(), now())
), action AS (
    INSERT INTO agentops_action
           (id, run_id, turn, call_index, tool, params, params_digest, readonly, risk, risk_reasons,
            idempotency_key, status, attempts, result, task_id, created_at)
    VALUES (%(action)s, %(run)s, 1, 0, %(tool)s, %(params)s, %(digest)s, %(readonly)s, '', '[]', '',
            'rejected', 0, %(result)s, '', now())
)
INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
VALUES (%(run)s, 1, 'gate', %(action)s, %(gate)s, now())
"""


def _j(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def tool_call_direct(
    *, user: Any, name: str, arguments: Any, idempotency_key: str | None = None
) -> dict[str, Any]:
    """Gate, then execute one call for ``user`` (from the session or token) and trace it.

    Writes carry ``api:<user>:<key>``: the caller's Idempotency-Key, or a fresh one. Returns the
    envelope; a refusal has written nothing but its trace.
    """
    roles = user_roles(user=user)
    spec, args, verdict = gate.screen(name, arguments, roles=roles, user_id=user.pk)
    raw = arguments if isinstance(arguments, dict) else {"_arguments": arguments}
    params = args.model_dump(mode="json") if args is not None else raw
    ctx = CallContext(user=user)
    risk, reasons = (SideEffect.LOW, ())
    if verdict is None:
        risk, reasons = gate.assess_risk(spec, ctx, args)
        if risk == SideEffect.HIGH:
            verdict = gate.Verdict(
                "refuse",
                check="policy",
                error=ToolError(
                    "forbidden",
                    "approval_required",
                    f"This call needs a human approval ({'; '.join(reasons)}).",
                    "Ask the assistant instead: it routes the request to an approver.",
                ),
            )
    run_id, action_id = uuid.uuid4(), uuid.uuid4()
    digest = request_digest(tool=name, subject_id=user.pk, params=params)
    base = {
        "run": run_id,
        "action": action_id,
        "user": user.pk,
        "goal": f"API call {name}"[:200],
        "policy": POLICY_VERSION,
        "tool": name,
        "params": _j(params),
        "digest": digest,
        "readonly": spec.meta.readonly if spec else True,
    }
    if verdict is not None:
        envelope = verdict.error.envelope()
        with connection.cursor() as cursor:
            cursor.execute(
                _REFUSED_SQL,
                base
                | {
                    "outcome": verdict.error.reason,
                    "result": _j(envelope),
                    "gate": _j(
                        {
                            "tool": name,
                            "decision": "refuse",
                            "check": verdict.check,
                            "refusal": envelope,
                        }
                    ),
                },
            )
        return envelope

    key = ""
    if not spec.meta.readonly and spec.meta.enforced_idempotent:
        key = f"api:{user.pk}:{idempotency_key or uuid.uuid4().hex}"
    started_at = timezone.now()
    complete = release = False
    ctx = CallContext(user=user, run_id=str(run_id), action_id=str(action_id), idempotency_key=key)
    if key:
        claim = idempotency_claim(key=key, tool=name, subject_id=user.pk, digest=digest)
        if claim.state == "replay":
            envelope, outcome = claim.response, claim.response["signal"]
        elif claim.state == "reuse":
            envelope, outcome = (
                failure(
                    "idempotency_key_reuse",
                    "idempotency_key_reuse",
                    "This Idempotency-Key was already used with a different request.",
                    "Use a new key for a new request.",
                ),
                "red",
            )
        elif claim.state == "in_progress":
            envelope, outcome = (
                failure(
                    "in_progress",
                    "in_progress",
                    "A request with this key is still running.",
                    "Retry after a moment with the same key.",
                    500,
                ),
                "yellow",
            )
        else:
            envelope, outcome = invoke(spec, ctx, args, faults=[])
            complete, release = outcome in ("green", "red"), outcome == "yellow"
    else:
        envelope, outcome = invoke(spec, ctx, args, faults=[])
    status = {"green": "succeeded", UNKNOWN_OUTCOME: "unknown_outcome"}.get(outcome, "failed")
    run_status = {"green": "succeeded", UNKNOWN_OUTCOME: "reconciling"}.get(outcome, "failed")
    result = _j(envelope)
    with connection.cursor() as cursor:
        cursor.execute(
            _RECORD_SQL,
            base
            | {
                "status": status,
                "result": result,
                "run_status": run_status,
                "outcome": outcome,
                "started_at": started_at,
                "deadline": started_at + timedelta(seconds=60),
                "duration": int((timezone.now() - started_at).total_seconds() * 1000),
                "risk": risk.value,
                "risk_reasons": _j(list(reasons)),
                "key": key,
                "complete": complete,
                "release": release,
                "gate": _j(
                    {
                        "tool": name,
                        "decision": "execute",
                        "check": "policy",
                        "risk": risk.value,
                        "idempotency_key": key,
                    }
                ),
                "started": _j({"tool": name, "attempt": 1, "idempotency_key": key}),
                "finished": _j(
                    {"tool": name, "attempt": 1, "outcome": outcome, "result": envelope}
                ),
                "run_finished": _j({"status": run_status, "outcome": outcome}),
            },
        )
    if outcome == UNKNOWN_OUTCOME:
        enqueue_reconcile(action_id)
    return envelope
