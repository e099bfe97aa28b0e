"""What stands in the way of a booking, as the parser reads it and as the rules planner words
it from the search's observations (no database: hand-built contexts)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from agentops.contract import ModelContext, Observation, Proposal, StepOutcome, failure, success
from bookings.assistant.parsing import (
    CANCEL_OR_CHANGE,
    FOR_SOMEONE_ELSE,
    BookingRequest,
    Clarification,
    parse_booking_request,
)
from bookings.assistant.planner import RulesPlanner

# The planner reads the room names through a selector (no rooms here: names match nothing).
pytestmark = pytest.mark.django_db

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 26, 13, 0, tzinfo=SHANGHAI)  # a Saturday
START, END = "2026-09-28T14:00:00+08:00", "2026-09-28T15:00:00+08:00"


def parse(text: str) -> BookingRequest | Clarification:
    return parse_booking_request(text, now=NOW, tz=SHANGHAI)


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("cancel all my meetings", "en"),
        ("Please cancel my booking B12", "en"),
        ("move my 2pm meeting on Monday to 3pm", "en"),
        ("取消我所有的会议", "zh"),
        ("帮我退订周一的会议室", "zh"),
        ("把周一的会议改到下午三点", "zh"),
    ],
)
def test_cancelling_or_changing_is_read_as_such(text: str, language: str) -> None:
    assert parse(text) == Clarification((), language, CANCEL_OR_CHANGE)


@pytest.mark.parametrize(
    ("text", "language", "named"),
    [
        ("book a room for e23 on Monday 14:00-15:00 for 2 people", "en", "E23"),
        ("Book a room on behalf of A01 Monday 2-3pm for 4", "en", "A01"),
        ("帮e23订周一下午两点到三点的会议室，2个人", "zh", "E23"),
        ("给 E23 订周一下午两点到三点的会议室，2个人", "zh", "E23"),
        ("替e23订个会议室", "zh", "E23"),
    ],
)
def test_a_booking_for_another_employee_is_read_as_such(
    text: str, language: str, named: str
) -> None:
    assert parse(text) == Clarification((), language, FOR_SOMEONE_ELSE, named=named)


@pytest.mark.parametrize(
    "text",
    [
        "book a room for 2 people on Monday 14:00-15:00",
        "帮我订周一下午两点到三点的会议室，2个人",
        "book R9 for 2 on Monday 14:00-15:00",
        "book a room for the change review on Monday 14:00-15:00 for 6",
        "book a room on Monday 14:00-15:00 for 3 people, we can move fast",
    ],
)
def test_ordinary_requests_are_neither_for_another_employee_nor_changes(text: str) -> None:
    assert isinstance(parse(text), BookingRequest)


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("book a room yesterday 10:00-11:00 for 3 people", "2026-09-25"),
        ("book a room the day before yesterday 10-11am for 3", "2026-09-24"),
        ("book a room last Monday 10-11am for 3", "2026-09-21"),
        ("帮我订昨天上午10点到11点的会议室，3个人", "2026-09-25"),
        ("前天上午10点到11点订会议室，3个人", "2026-09-24"),
        ("上周一上午10点到11点订会议室，3个人", "2026-09-14"),
    ],
)
def test_days_in_the_past_are_read_as_written(text: str, day: str) -> None:
    result = parse(text)

    assert isinstance(result, BookingRequest)
    assert result.start_at.date().isoformat() == day


@pytest.mark.parametrize(
    ("text", "another"),
    [
        ("book another room on Monday 14:00-15:00 for 2", True),
        ("book an extra room on Monday 14:00-15:00 for 2", True),
        ("再订一间周一下午两点到三点的会议室，2个人", True),
        ("另外订周一下午两点到三点的会议室，2个人", True),
        ("book a room on Monday 14:00-15:00 for 2", False),
        ("帮我订周一下午两点到三点的会议室，2个人", False),
    ],
)
def test_another_room_is_read(text: str, another: bool) -> None:
    result = parse(text)

    assert isinstance(result, BookingRequest)
    assert result.another_room is another


# --- the planner, from observations -----------------------------------------------------------


def context(goal: str, history: list[Observation] = (), language: str = "en") -> ModelContext:
    return ModelContext(
        goal=goal,
        language=language,
        now=NOW.isoformat(),
        subject={"employee_id": "E17", "department": "Engineering"},
        delegation={},
        tools=[],
        history=list(history),
        turn=len(history) + 1,
    )


def room(code: str, capacity: int) -> dict:
    return {
        "room_id": code,
        "name": code,
        "capacity": capacity,
        "equipment": [],
        "floor": 3,
        "department": "Engineering",
        "requires_approval": False,
        "version": 1,
        "notes_quote": "",
    }


def found(*rooms: dict, **extra) -> Observation:
    data = {"rooms": list(rooms), "observed_at": NOW.isoformat(), "truncated": False} | extra
    return Observation(turn=1, tool="find_available_rooms", arguments={}, result=success(data))


EN = "book R11 on 2026-09-28 14:00-15:00 for 2 people"


def test_a_named_room_is_passed_to_the_search() -> None:
    step = RulesPlanner().propose(context(EN))

    assert step.proposals == [
        Proposal(
            "find_available_rooms",
            {"start_at": START, "end_at": END, "attendees": 2, "equipment": [], "room_id": "R11"},
        )
    ]


def test_more_people_than_a_search_takes_are_searched_at_its_maximum() -> None:
    step = RulesPlanner().propose(context("book a room on 2026-09-28 14:00-15:00 for 900 people"))

    assert step.proposals[0].arguments["attendees"] == 500


def test_a_named_room_that_cannot_be_booked_offers_three_free_rooms_best_first() -> None:
    named = {
        "room_id": "R11",
        "exists": True,
        "bookable": False,
        "capacity": 6,
        "equipment": [],
        "free": True,
    }
    history = [found(room("R9", 6), room("R3", 4), room("R1", 2), room("R2", 3), named_room=named)]
    step = RulesPlanner().propose(context(EN, history))

    assert step.proposals == []
    assert step.outcome == StepOutcome.GAVE_UP
    assert step.message == (
        "R11 cannot be booked: it is not open for booking. Free rooms for 2 people at that "
        "time: R1, R2 and R3. Ask again naming one."
    )


def test_no_free_room_at_all_says_so_after_the_named_one() -> None:
    named = {"room_id": "R9999", "exists": False, "bookable": False}
    named |= {"capacity": None, "equipment": [], "free": False}
    step = RulesPlanner().propose(
        context(EN.replace("R11", "R9999"), [found(named_room=named, largest_capacity=16)])
    )

    assert step.message == (
        "There is no room R9999. No other room fits 2 people at that time either."
    )


def test_own_bookings_at_that_time_ask_instead_of_booking() -> None:
    own = [
        {"booking_id": "B12", "room_id": "R9", "start_at": START, "end_at": END},
        {"booking_id": "B13", "room_id": "R7", "start_at": START, "end_at": END},
    ]
    goal = "帮我订 2026 年 9 月 28 日 14:00–15:00 的会议室，2 个人"
    step = RulesPlanner().propose(context(goal, [found(room("R1", 2), own_bookings=own)], "zh"))

    assert step.proposals == []
    assert step.outcome == StepOutcome.ASK_USER
    assert step.message.startswith(
        "你在该时段已有 R9（预订 B12，14:00–15:00）和R7（预订 B13，14:00–15:00）。"
    )


def test_a_rate_limited_search_is_not_retried_into_the_same_wall() -> None:
    limited = failure("rate_limited", "rate_limited", "More than 30 tool calls.", "Wait.", 12_300)
    history = [Observation(turn=1, tool="find_available_rooms", arguments={}, result=limited)]
    step = RulesPlanner().propose(context("book a room on 2026-09-28 14:00-15:00 for 2", history))

    assert step.proposals == []
    assert step.message == "You sent too many requests this minute. Try again in 13 seconds."


def test_a_booking_refusal_is_worded_in_the_request_language() -> None:
    refused = failure(
        "invalid_input",
        "too_long",
        "A booking may last at most 4 hours.",
        "Split it into shorter bookings.",
    ) | {
        "detail": {
            "msgid": "A booking may last at most %(hours)d hours.",
            "hint_msgid": "Split it into shorter bookings.",
            "params": {"hours": 4},
        }
    }
    history = [Observation(turn=1, tool="find_available_rooms", arguments={}, result=refused)]
    goal = "帮我订 2026 年 9 月 28 日 14:00–15:00 的会议室，2 个人"
    step = RulesPlanner().propose(context(goal, history, "zh"))

    assert step.message == "查询会议室被拒绝：单次预订最长 4 小时。"  # no English half
