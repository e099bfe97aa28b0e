"""The run kinds' table (agentops.runtime.kinds.KINDS) is complete, documented, and is what the
engine does: each rule checked against the behaviour of a direct call and an MCP session call
(the assistant's rules are held by the saga, retry and trajectory tests)."""

from __future__ import annotations

import dataclasses

import pytest

from agentops.models import AgentRun, RunKind
from agentops.runtime import kinds
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.kinds import KINDS, AfterCall, KindRules, kinds_where
from agentops.runtime.mcp_sessions import mcp_call
from agentops.runtime.story import trace_problems
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


def test_every_kind_has_its_rules() -> None:
    assert set(KINDS) == set(RunKind)
    assert all(isinstance(r, KindRules) for r in KINDS.values())


def test_every_rule_is_in_the_documented_table() -> None:
    table = [line for line in (kinds.__doc__ or "").splitlines() if line.startswith("| ``")]
    documented = {line.split("``")[1] for line in table}
    assert documented == {f.name for f in dataclasses.fields(KindRules)}


def test_kinds_where_selects_by_rule() -> None:
    assert kinds_where(swept=False) == [RunKind.MCP]
    assert kinds_where(after_call=AfterCall.NEXT_STEP) == [RunKind.ASSISTANT]
    assert set(kinds_where(compensates=False)) == {RunKind.DIRECT, RunKind.MCP}


def _search() -> dict:
    start, end = slot()
    return {"start_at": start.isoformat(), "end_at": end.isoformat(), "attendees": 2}


def _premium() -> dict:
    start, end = slot(hour=10)
    return {
        "room_id": "R16",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "expected_version": 0,
        "attendees": 4,
    }


def _mcp(user, name, arguments):
    return mcp_call(
        user_id=user.pk, session_id="kinds", name=name, arguments=arguments, idempotency_key=None
    )


def test_after_a_call_a_direct_run_ends_and_a_session_waits_for_its_client(
    transactional_db, e17
) -> None:
    assert tool_call_governed(user=e17, name="find_available_rooms", arguments=_search())["ok"]
    assert _mcp(e17, "find_available_rooms", _search())["ok"]

    direct = AgentRun.objects.get(kind=RunKind.DIRECT)
    session = AgentRun.objects.get(kind=RunKind.MCP)
    assert (direct.status, session.status) == ("succeeded", "running")
    # Neither opens with run_started (started_event): each trace still reconstructs its run.
    assert trace_problems(run=direct) == trace_problems(run=session) == []


def test_a_refusal_ends_a_direct_run_but_not_a_session(transactional_db, e17) -> None:
    bad = _search() | {"requester": "E23"}  # an unknown field: refused by the schema
    assert tool_call_governed(user=e17, name="find_available_rooms", arguments=bad)["ok"] is False
    assert _mcp(e17, "find_available_rooms", bad)["ok"] is False

    direct = AgentRun.objects.get(kind=RunKind.DIRECT)
    session = AgentRun.objects.get(kind=RunKind.MCP)
    assert (direct.status, direct.outcome) == ("failed", "refused")
    assert session.status == "running"


def test_an_approval_holds_a_direct_run_but_only_the_call_of_a_session(
    transactional_db, e17
) -> None:
    direct_answer = tool_call_governed(user=e17, name="reserve_room", arguments=_premium())
    session_answer = _mcp(e17, "reserve_room", _premium())

    assert direct_answer["code"] == session_answer["code"] == "approval_pending"
    direct = AgentRun.objects.get(kind=RunKind.DIRECT)
    session = AgentRun.objects.get(kind=RunKind.MCP)
    assert direct.status == "waiting_approval"
    assert session.status == "running"
    assert session.actions.get().status == "waiting_approval"


def test_a_run_is_created_with_run_started_exactly_when_its_kind_says(transactional_db, e17):
    from agentops.contract import Delegation
    from agentops.runtime.kinds import run_create
    from agentops.runtime.timing import DIRECT_BUDGETS

    common = {"subject": e17, "goal": "x", "model_name": "m", "budgets": DIRECT_BUDGETS}
    delegation = Delegation(tools=frozenset(), max_writes=0)
    with pytest.raises(ValueError, match="needs run_started"):
        run_create(kind=RunKind.ASSISTANT, delegation=delegation, **common)
    with pytest.raises(ValueError, match="has no run_started"):
        run_create(kind=RunKind.DIRECT, delegation=delegation, started={"a": 1}, **common)
    assert AgentRun.objects.count() == 0
