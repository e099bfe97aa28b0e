"""The delegation: typed, set by the host, and only ever narrowed by an explicit scope."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from agentops.contract import Delegation, ScopeError
from tests.conftest import SHANGHAI

START = datetime(2026, 12, 2, 14, tzinfo=SHANGHAI)
END = START + timedelta(hours=1)
HOST = Delegation(
    tools=frozenset({"find_available_rooms", "reserve_room"}),
    max_writes=1,
    window=(START, END),
    attendees=3,
    equipment=frozenset({"projector"}),
)


def test_tools_are_intersected_never_added():
    narrowed = HOST.narrow(tools=frozenset({"reserve_room", "cancel_booking"}))
    assert narrowed.tools == {"reserve_room"}


def test_more_writes_than_the_request_grants_are_not_given():
    assert HOST.narrow(max_writes=5).max_writes == 1
    assert HOST.narrow(max_writes=0).max_writes == 0


def test_a_scope_without_window_or_attendees_keeps_the_requests():
    narrowed = HOST.narrow(max_writes=5)
    assert narrowed.window == HOST.window
    assert narrowed.attendees == 3
    assert narrowed.equipment == {"projector"}


def test_windows_intersect():
    narrowed = HOST.narrow(window=(START - timedelta(hours=2), START + timedelta(minutes=30)))
    assert narrowed.window == (START, START + timedelta(minutes=30))


def test_a_window_outside_the_request_is_refused():
    with pytest.raises(ScopeError, match="outside"):
        HOST.narrow(window=(END, END + timedelta(hours=1)))


def test_other_attendees_than_the_request_are_refused():
    with pytest.raises(ScopeError, match="3 people"):
        HOST.narrow(attendees=5)


def test_another_resource_than_the_request_named_is_refused():
    named = Delegation(tools=HOST.tools, max_writes=1, resource="R7")
    with pytest.raises(ScopeError, match="R7"):
        named.narrow(resource="R9")
    assert HOST.narrow(resource="R9").resource == "R9"


def test_equipment_adds_up():
    assert HOST.narrow(equipment=frozenset({"whiteboard"})).equipment == {
        "projector",
        "whiteboard",
    }


def test_a_read_only_request_cannot_be_scoped_into_writes():
    reads = Delegation(tools=frozenset({"find_available_rooms", "list_my_bookings"}))
    narrowed = reads.narrow(tools=None, max_writes=5)
    assert narrowed.tools == reads.tools
    assert narrowed.max_writes == 0


def test_json_round_trip_keeps_every_field():
    named = HOST.narrow(resource="R7")
    assert Delegation.from_json(named.to_json()) == named


@pytest.mark.parametrize(
    "window",
    [(START, START), (END, START), (START.replace(tzinfo=None), END.replace(tzinfo=None))],
)
def test_an_unusable_window_cannot_be_built(window):
    with pytest.raises(ScopeError):
        Delegation(window=window)
