"""The run kinds' table (agentops.runtime.kinds.KINDS) is complete, documented, and is what the
engine does: each rule checked against the behaviour of a direct call and an MCP session call
(the assistant's rules are held by the saga, retry and trajectory tests)."""

from __future__ import annotations

import dataclasses

import pytest

from agentops.models import AgentRun, RunKind
from agentops.runtime import kinds
from agentops.runtime.kinds import KINDS, AfterCall, KindRules, kinds_where
from agentops.runtime.mcp_sessions import mcp_call
from agentops.runtime.recorder import tool_call_governed
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
