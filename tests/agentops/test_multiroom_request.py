"""A request that names several rooms: parsed into every room, read into a delegation of one
write per room, and the gate holds each write to those rooms."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agentops.contract import Compensation, Delegation, ScopeError
from agentops.runtime import gate, registry
from bookings.assistant import ASSISTANT
from bookings.assistant.parsing import BookingRequest, Clarification, parse_booking_request

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 26, 13, 0, tzinfo=SHANGHAI)  # a Saturday
START = datetime(2026, 9, 27, 14, 0, tzinfo=SHANGHAI)
END = START + timedelta(hours=1)


def parse(text: str) -> BookingRequest | Clarification:
    return parse_booking_request(text, now=NOW, tz=SHANGHAI)


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("R7 and R9 tomorrow 14:00-15:00 for a workshop", "en"),
        ("明天14:00-15:00 订 R7 和 R9 开工作坊", "zh"),
        ("book r7 & R9 tomorrow 2pm to 3pm", "en"),
    ],
)
def test_several_named_rooms_are_read_without_a_head_count(text, language):
    parsed = parse(text)

    assert isinstance(parsed, BookingRequest), parsed
    assert parsed.room_codes == ("R7", "R9")
    assert (parsed.start_at, parsed.end_at) == (START, END)
    assert parsed.attendees is None and parsed.language == language


def test_a_head_count_with_several_rooms_is_kept_and_repeats_are_dropped():
    parsed = parse("R9, R7 and R9 tomorrow 14:00-15:00 for 4 people")

    assert parsed.room_codes == ("R9", "R7") and parsed.attendees == 4


def test_one_named_room_still_needs_a_head_count():
    assert parse("R7 tomorrow 14:00-15:00 for a workshop") == Clarification(("attendees",), "en")
    assert parse("R7 tomorrow 14:00-15:00 for 3").room_codes == ()  # single-room: as before


@pytest.mark.django_db  # the room names are read through a selector
def test_several_rooms_delegate_one_write_per_room_and_only_those_rooms():
    reading = ASSISTANT.read_request("R7 and R9 tomorrow 14:00-15:00 for a workshop", now=NOW)
    delegation = reading.delegation

    assert delegation.max_writes == 2
    assert delegation.resources == {"R7", "R9"} and delegation.resource is None
    assert delegation.attendees is None
    assert reading.understood["rooms"] == ["R7", "R9"]
    assert Delegation.from_json(delegation.to_json()) == delegation


def test_a_scope_may_narrow_several_rooms_to_one_of_them_but_not_to_another():
    several = Delegation(
        tools=frozenset({"reserve_room"}), max_writes=2, resources=frozenset({"R7", "R9"})
    )

    assert several.narrow(resource="R9").allowed_resources == {"R9"}
    with pytest.raises(ScopeError, match="R7, R9"):
        several.narrow(resource="R12")


@pytest.mark.parametrize(("room", "refused"), [("R7", False), ("R9", False), ("R12", True)])
def test_the_gate_holds_each_write_to_the_named_rooms(room, refused):
    spec = registry.get("reserve_room")
    args = spec.input_model.model_validate(
        {"room_id": room, "start_at": START, "end_at": END, "attendees": 4, "expected_version": 0}
    )
    several = Delegation(
        tools=frozenset({"reserve_room"}),
        max_writes=2,
        window=(START, END),
        resources=frozenset({"R7", "R9"}),
    )

    verdict = gate.check_scope(spec, args, several, writes_so_far=1)

    assert (verdict is not None) == refused
    if refused:
        assert verdict.error.code == "resource_differs"
    assert gate.check_scope(spec, args, several, writes_so_far=2) is not None  # two at most


def test_a_compensation_must_name_a_registered_write_tool(monkeypatch):
    registry.check_compensations()  # the booking tools: reserve_room undone by cancel_booking
    spec = registry.get("reserve_room")
    wrong = Compensation(tool="get_booking", arguments=lambda r: r, label=lambda r: "")
    monkeypatch.setitem(
        registry._TOOLS, "reserve_room", dataclasses.replace(spec, compensate=wrong)
    )

    with pytest.raises(ValueError, match="compensated by get_booking"):
        registry.check_compensations()
