"""What each kind of run does, as one table, and the one constructor of runs.

Three kinds of run share the engine (the gate, the recorder, idempotency, reconciliation, the
trace) and differ only in what this table says. Each rule is read in one place:

| rule | read by | assistant | direct | mcp |
|---|---|---|---|---|
| ``after_call``: a settled call leads to | ``runs.action_settled`` / ``runs.resume_if_clear`` | the next step | the run's end | the client's next call |
| ``approval_holds_run``: a call waiting for an approver | ``recorder`` (proposal, precheck) | holds the run | holds the run | holds only the call |
| ``transient_retries``: yellow failures retried with backoff | ``recorder.finish_locked`` | yes | no (the caller retries) | no |
| ``same_call_once``: a second write of an intent already confirmed in the run | ``recorder._key_claim`` | answers from the first | (one call) | each call its own |
| ``refusal_ends_run``: a gate refusal | ``recorder`` | (the model sees it) | ends the run | only budget or loop |
| ``compensates``: confirmed writes released at failure or cancel | ``saga.run_end`` | yes | no | no |
| ``swept``: the sweeper steps it when it sits idle | ``sweeper.sweep`` | yes | yes | no (sessions expire instead) |
| ``verify_each_call``: a confirmed write's receipt checked against the environment as it settles (else all at the run's end) | ``runs.action_settled`` | no (at the end: ``verifier.finish_with_verification``) | yes | yes |
| ``started_event``: its trace opens with ``run_started`` (else with its call's gate) | ``run_create``, ``story.trace_problems`` | yes | no | no |

``tests/agentops/runtime/test_kinds.py`` checks the table row by row against the behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from django.utils import timezone

from agentops.contract import Delegation
from agentops.models import AgentRun, EventKind, RunKind
from agentops.runtime.store import run_insert
from agentops.runtime.timing import Budgets
from agentops.runtime.trace import run_insert_with_event

POLICY_VERSION = "2026-11-30.1"


class AfterCall(StrEnum):
    """What a settled call leads to, once nothing else in its turn is open."""

    NEXT_STEP = "next_step"  # the model plans again with what it observed
    END_RUN = "end_run"  # the run ends with the call's outcome
    CLIENT_NEXT = "client_next"  # the run stays open for the client's next call


@dataclass(frozen=True)
class KindRules:
    after_call: AfterCall
    approval_holds_run: bool
    transient_retries: bool
    same_call_once: bool
    refusal_ends_run: bool
    compensates: bool
    swept: bool
    verify_each_call: bool
    started_event: bool


KINDS: dict[RunKind, KindRules] = {
    RunKind.ASSISTANT: KindRules(
        after_call=AfterCall.NEXT_STEP,
        approval_holds_run=True,
        transient_retries=True,
        same_call_once=True,
        refusal_ends_run=False,
        compensates=True,
        swept=True,
        verify_each_call=False,
        started_event=True,
    ),
    RunKind.DIRECT: KindRules(
        after_call=AfterCall.END_RUN,
        approval_holds_run=True,
        transient_retries=False,
        same_call_once=False,
        refusal_ends_run=True,
        compensates=False,
        swept=True,
        verify_each_call=True,
        started_event=False,
    ),
    RunKind.MCP: KindRules(
        after_call=AfterCall.CLIENT_NEXT,
        approval_holds_run=False,
        transient_retries=False,
        same_call_once=False,
        refusal_ends_run=False,
        compensates=False,
        swept=False,
        verify_each_call=True,
        started_event=False,
    ),
}


def rules(run: AgentRun) -> KindRules:
    return KINDS[RunKind(run.kind)]


def kinds_where(**wanted: Any) -> list[RunKind]:
    """The kinds whose rules have these values (for a query over many runs)."""
    return [
        kind
        for kind, r in KINDS.items()
        if all(getattr(r, name) == value for name, value in wanted.items())
    ]


def run_create(
    *,
    kind: RunKind,
    subject: Any,
    goal: str,
    model_name: str,
    delegation: Delegation,
    budgets: Budgets,
    started: dict[str, Any] | None = None,
    **fields: Any,
) -> AgentRun:
    """Create a run: the one way a run comes to be, whatever its kind. The caller holds a
    transaction. With ``started``, the run and its ``run_started`` event (that payload) are one
    statement; without, the run alone (a direct call or an MCP session records its call's
    events instead): as the kind's ``started_event`` says. ``fields``: the kind's own columns
    (idempotency key, session id, ...)."""
    if KINDS[kind].started_event != (started is not None):
        raise ValueError(f"a {kind} run {'needs' if started is None else 'has no'} run_started")
    columns = {
        "subject": subject,
        "kind": kind,
        "goal": goal,
        "model_name": model_name,
        "delegation": delegation.to_json(),
        "budgets": budgets.to_json(),
        "policy_version": POLICY_VERSION,
        "deadline": timezone.now() + timedelta(seconds=budgets.deadline_s),
        **fields,
    }
    run = AgentRun(**columns)
    if started is None:
        return run_insert(run)
    run_insert_with_event(run=run, kind=EventKind.RUN_STARTED, payload=started)
    return run
