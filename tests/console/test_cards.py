"""The run card's fragments: every kind of trace event renders, in English and in Chinese, with
the facts the page needs (the booking code, the rooms found, why a call was refused), in a
person's words: no tool name, schedule version or engine term reaches an employee's card."""

from __future__ import annotations

import pytest

from agentops.models import EventKind
from console.cards import event_fragment, event_view

AT = "2026-12-01T06:00:00+00:00"
RECEIPT = {
    "booking_id": "B204",
    "room_id": "R7",
    "start_at": "2026-12-01T14:00:00+08:00",
    "end_at": "2026-12-01T15:00:00+08:00",
}
PAYLOADS = {
    EventKind.RUN_STARTED: {
        "understood": {
            "start_at": "2026-12-01T14:00:00+08:00",
            "end_at": "2026-12-01T15:00:00+08:00",
            "attendees": 3,
            "equipment": ["projector"],
            "room": "R7",
        }
    },
    EventKind.MODEL_STEP: {"proposals": [{"tool": "reserve_room", "arguments": {"room_id": "R7"}}]},
    EventKind.MODEL_ERROR: {"error": "TimeoutError"},
    EventKind.GATE: {
        "tool": "reserve_room",
        "decision": "refuse",
        "check": "scope",
        "risk_reasons": [],
        "refusal": {"message": "The request named R9, not R7."},
    },
    EventKind.PRECHECK_REFUSED: {"tool": "reserve_room", "refusal": {"message": "Gone."}},
    EventKind.EXECUTION_STARTED: {"tool": "reserve_room", "attempt": 2},
    EventKind.EXECUTION_FINISHED: {
        "tool": "find_available_rooms",
        "outcome": "green",
        "result": {"ok": True, "data": {"rooms": [{"room_id": "R7", "capacity": 4, "version": 3}]}},
    },
    EventKind.EXECUTION_SKIPPED: {"why": "run is terminal"},
    EventKind.RETRY_SCHEDULED: {"attempt": 2, "delay_ms": 300},
    EventKind.LEASE_EXPIRED: {},
    EventKind.RUN_WAITING_APPROVAL: {"turn": 2},
    EventKind.RUN_RECONCILING: {},
    EventKind.RECONCILE_LOOKUP: {"status": "found", "receipt": RECEIPT},
    EventKind.RECONCILE_RETRY: {"key": "k"},
    EventKind.RECONCILE_NEEDS_HUMAN: {"key": "k"},
    EventKind.RUN_RESUMED: {},
    EventKind.VERIFIED: {"holds": True, "detail": ""},
    EventKind.BUDGET_EXHAUSTED: {"turn": 9},
    EventKind.APPROVAL_REQUESTED: {"request": "r", "deadline": "2026-12-01T07:00:00+00:00"},
    EventKind.APPROVAL_DECIDED: {"status": "rejected", "approver": "a01", "reason": "No budget"},
    EventKind.APPROVAL_FROZEN: {"code": "drift", "message": "The room changed."},
    EventKind.RECONCILE_DECIDED: {"decision": "retry", "operator": "o01", "status": "absent"},
    EventKind.RUN_COMPENSATING: {"to_undo": ["k"]},
    EventKind.COMPENSATION_PLANNED: {"tool": "cancel_booking", "label": "B204"},
    EventKind.RUN_ROLLBACK_PENDING: {"held": ["B204"], "released": [], "evidence": []},
    EventKind.RUN_FINISHED: {"status": "succeeded", "outcome": "verified", "reply": "Booked R7."},
}


# Fragments are kept per (run, seq, language): events never change, so each test line below
# uses a run id of its own.
def event(kind: str, seq: int = 5) -> dict:
    return {"seq": seq, "kind": kind, "at": AT, "action_id": "", "payload": PAYLOADS[kind]}


def test_every_event_kind_has_a_card_line():
    assert set(PAYLOADS) == set(EventKind)


@pytest.mark.parametrize("kind", list(EventKind))
@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_each_event_renders_as_out_of_band_swaps(kind, language):
    fragment = event_fragment(event(kind), run_id=f"{kind}-{language}", language=language)

    assert f'data-seq="5" data-kind="{kind}"' in fragment
    assert 'id="run-events" hx-swap-oob="beforeend"' in fragment
    assert 'data-last-seq="5"' in fragment


def test_the_card_line_of_a_chinese_page_speaks_chinese():
    lines = {
        kind: event_fragment(event(kind, seq=7), run_id=f"zh-{kind}", language="zh-hans")
        for kind in (EventKind.RUN_STARTED, EventKind.GATE, EventKind.APPROVAL_DECIDED)
    }

    assert "已理解" in lines[EventKind.RUN_STARTED]
    assert "3 人" in lines[EventKind.RUN_STARTED]
    assert "投影仪" in lines[EventKind.RUN_STARTED]
    assert "2026年12月1日" in lines[EventKind.RUN_STARTED]
    assert "被拒绝" in lines[EventKind.GATE]
    assert "请求授权的范围" in lines[EventKind.GATE]
    assert "已拒绝" in lines[EventKind.APPROVAL_DECIDED]


def test_results_show_rooms_with_their_seats_and_receipts_with_the_booking_code():
    found = event_fragment(event(EventKind.EXECUTION_FINISHED), run_id="found", language="en")
    checked = event_fragment(event(EventKind.RECONCILE_LOOKUP), run_id="checked", language="en")

    assert 'data-room="R7"' in found
    assert "4 seats" in found
    assert "looking for free rooms" in found
    assert 'data-booking="B204"' in checked
    assert "it was done" in checked


ENGINE_WORDS = (
    "reserve_room",
    "find_available_rooms",
    "cancel_booking",
    "version",
    "Gate",
    "gate",
    "<code>",
    "proposes",
    "Proposes",
)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_no_card_line_shows_a_tool_name_a_version_or_the_gate(language):
    for kind in EventKind:
        html = event_fragment(event(kind, seq=11), run_id=f"words-{language}", language=language)
        line = html.split('<li class="run-event"', 1)[1].split(">", 1)[1].split("</li>", 1)[0]
        shown = [word for word in ENGINE_WORDS if word in line]
        assert not shown, f"{kind} ({language}) shows {shown}: {line}"


def test_each_call_is_named_in_words_and_a_tool_the_card_does_not_know_is_a_step():
    step = event_fragment(event(EventKind.MODEL_STEP), run_id="step", language="en")
    started = event_fragment(event(EventKind.EXECUTION_STARTED), run_id="started", language="en")
    gateway = {
        "seq": 5,
        "kind": EventKind.EXECUTION_STARTED,
        "at": AT,
        "action_id": "",
        "payload": {"tool": "weather.forecast", "attempt": 1},
    }
    other = event_fragment(gateway, run_id="other", language="en")
    chinese = event_fragment(event(EventKind.GATE), run_id="gate-zh", language="zh-hans")

    assert "Next</strong>" in step and "booking the room R7" in step
    assert "booking the room" in started and "attempt 2" in started
    assert "a step" in other and "weather.forecast" not in other
    assert "预订会议室" in chinese


def test_the_status_after_an_event_follows_the_run():
    assert event_view(event(EventKind.RUN_WAITING_APPROVAL))["status"]["code"] == (
        "waiting_approval"
    )
    assert event_view(event(EventKind.RUN_FINISHED))["status"]["code"] == "succeeded"
    assert event_view(event(EventKind.GATE))["status"] is None


def test_a_malformed_payload_still_renders():
    broken = {"seq": 9, "kind": "execution_finished", "at": "not a time", "payload": "x"}
    assert 'data-seq="9"' in event_fragment(broken, run_id="broken", language="en")
