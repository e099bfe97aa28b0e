"""The offline rules planner, step by step, from hand-built contexts (no database)."""

from __future__ import annotations

from typing import Any

import pytest

from agentops.contract import ModelContext, Observation, Proposal, Step, failure, success
from bookings.assistant.planner import RulesPlanner

# The planner reads the room names through a selector (no rooms here: names match nothing).
pytestmark = pytest.mark.django_db

NOW = "2026-09-20T10:00:00+08:00"
GOAL = "book a room on 2026-09-28 14:00-15:00 for 3 people with a projector"
GOAL_ZH = "帮我订 2026 年 9 月 28 日 14:00–15:00 的会议室，3 个人，要有投影"
START, END = "2026-09-28T14:00:00+08:00", "2026-09-28T15:00:00+08:00"
SEARCH = {"start_at": START, "end_at": END, "attendees": 3, "equipment": ["projector"]}
ENG, SALES = "Engineering", "Sales"


def context(
    history: list[Observation] = (),
    *,
    goal: str = GOAL,
    language: str = "en",
    department: str = ENG,
) -> ModelContext:
    return ModelContext(
        goal=goal,
        language=language,
        now=NOW,
        subject={"employee_id": "E17", "department": department},
        delegation={},
        tools=[],
        history=list(history),
        turn=len(history) + 1,
    )


def room(
    code: str,
    capacity: int,
    *,
    version: int = 1,
    department: str = ENG,
    requires_approval: bool = False,
) -> dict[str, Any]:
    return {
        "room_id": code,
        "name": code,
        "capacity": capacity,
        "equipment": ["projector"],
        "floor": 3,
        "department": department,
        "requires_approval": requires_approval,
        "version": version,
        "notes_quote": "",
    }


def found(*rooms: dict[str, Any], turn: int = 1) -> Observation:
    data = {"rooms": list(rooms), "observed_at": NOW, "truncated": False}
    return Observation(
        turn=turn, tool="find_available_rooms", arguments=SEARCH, result=success(data)
    )


def find_failed(reason: str = "timeout", turn: int = 1) -> Observation:
    return Observation(
        turn=turn,
        tool="find_available_rooms",
        arguments=SEARCH,
        result=failure(reason, reason, "The search did not answer.", "Try once more."),
    )


def reserve_args(code: str, version: int) -> dict[str, Any]:
    return {
        "room_id": code,
        "start_at": START,
        "end_at": END,
        "attendees": 3,
        "equipment": ["projector"],
        "expected_version": version,
    }


def reserved(code: str, version: int, result: dict[str, Any], turn: int = 2) -> Observation:
    return Observation(
        turn=turn, tool="reserve_room", arguments=reserve_args(code, version), result=result
    )


CONFIRMED = success(
    {
        "booking_id": "B204",
        "room_id": "R7",
        "start_at": START,
        "end_at": END,
        "attendees": 3,
        "status": "confirmed",
        "replayed": False,
    }
)
CONFLICT = failure(
    "conflict", "slot_taken", "R7 is already booked for part of that time.", "Search again."
)


def propose(ctx: ModelContext) -> Step:
    return RulesPlanner().propose(ctx)


def test_the_first_step_searches_the_parsed_window():
    step = propose(context())

    assert step.proposals == [Proposal("find_available_rooms", SEARCH)]


def test_after_a_search_it_reserves_the_smallest_fitting_room_at_its_version():
    step = propose(
        context([found(room("R9", 6, version=4), room("R7", 4, version=17), room("R5", 8))])
    )

    assert step.proposals == [Proposal("reserve_room", reserve_args("R7", 17))]


def test_it_prefers_a_room_without_approval_over_a_smaller_premium_room():
    step = propose(
        context([found(room("R16", 4, requires_approval=True), room("R9", 6, version=2))])
    )

    assert step.proposals == [Proposal("reserve_room", reserve_args("R9", 2))]


def test_it_prefers_a_room_of_its_own_department_over_a_smaller_one_elsewhere():
    rooms = (room("R12", 4, version=3, department=SALES), room("R9", 6, version=2, department=ENG))

    engineer = propose(context([found(*rooms)], department=ENG))
    sales = propose(context([found(*rooms)], department=SALES))

    assert engineer.proposals == [Proposal("reserve_room", reserve_args("R9", 2))]
    assert sales.proposals == [Proposal("reserve_room", reserve_args("R12", 3))]


def test_a_room_named_in_the_request_is_the_one_reserved():
    goal = "book R9 on 2026-09-28 14:00-15:00 for 3 people with a projector"

    step = propose(context([found(room("R7", 4), room("R9", 6, version=5))], goal=goal))

    assert step.proposals == [Proposal("reserve_room", reserve_args("R9", 5))]


def test_after_a_reserve_conflict_it_searches_again():
    history = [found(room("R7", 4, version=17), room("R9", 6)), reserved("R7", 17, CONFLICT)]

    step = propose(context(history))

    assert step.proposals == [Proposal("find_available_rooms", SEARCH)]


def test_after_a_taken_slot_the_fresh_search_skips_that_room():
    history = [
        found(room("R7", 4, version=17), room("R9", 6, version=2)),
        reserved("R7", 17, CONFLICT),
        found(room("R7", 4, version=18), room("R9", 6, version=2), turn=3),
    ]

    step = propose(context(history))

    assert step.proposals == [Proposal("reserve_room", reserve_args("R9", 2))]


def test_after_a_stale_version_conflict_the_room_is_tried_again_at_its_new_version():
    stale = failure("conflict", "stale_version", "R7's schedule changed.", "Search again.")
    history = [
        found(room("R7", 4, version=17), room("R9", 6, version=2)),
        reserved("R7", 17, stale),
        found(room("R7", 4, version=18), room("R9", 6, version=2), turn=3),
    ]

    step = propose(context(history))

    assert step.proposals == [Proposal("reserve_room", reserve_args("R7", 18))]


def test_when_only_conflicted_rooms_remain_it_gives_up():
    history = [
        found(room("R7", 4, version=17)),
        reserved("R7", 17, CONFLICT),
        found(room("R7", 4), turn=3),
    ]

    step = propose(context(history))

    assert step.proposals == []
    assert step.outcome == "gave_up"
    assert step.message == "No room fits 3 people with projector for that time. Try another time?"


def test_a_timed_out_search_is_tried_once_more():
    step = propose(context([find_failed("timeout")]))

    assert step.proposals == [Proposal("find_available_rooms", SEARCH)]


def test_a_second_timed_out_search_gives_up_saying_availability_could_not_be_verified():
    step = propose(context([find_failed("timeout"), find_failed("timeout", turn=2)]))

    assert step.proposals == []
    assert step.outcome == "gave_up"
    assert "could not verify" in step.message
    assert "booked nothing" in step.message


def test_a_search_refused_for_good_is_not_retried_and_says_why():
    step = propose(context([find_failed("out_of_scope")]))

    assert step.proposals == []
    assert step.outcome == "gave_up"
    assert step.message == "The room search was refused: The search did not answer."
    assert "could not verify" not in step.message


def test_no_free_room_gives_up_naming_people_and_equipment():
    step = propose(context([found()]))

    assert step.proposals == []
    assert step.outcome == "gave_up"
    assert step.message == "No room fits 3 people with projector for that time. Try another time?"


def test_a_reserve_refused_for_another_reason_gives_up_with_its_message():
    refused = failure(
        "forbidden", "approval_required", "R16 needs an approval.", "Ask an approver."
    )

    step = propose(context([found(room("R7", 4, version=17)), reserved("R7", 17, refused)]))

    assert step.proposals == []
    assert step.outcome == "gave_up"
    assert step.message == "The booking was refused: R16 needs an approval."


def test_an_unparseable_request_asks_the_user_without_proposals():
    step = propose(context(goal="book a room please"))

    assert step.proposals == []
    assert step.outcome == "ask_user"
    assert step.message == (
        "Could you tell me which day, what time (start and end) and for how many people?"
    )


def test_a_chinese_request_searches_the_same_window():
    step = propose(context(goal=GOAL_ZH, language="zh"))

    assert step.proposals == [Proposal("find_available_rooms", SEARCH)]


def test_a_chinese_request_gets_chinese_messages():
    no_room = propose(context([found()], goal=GOAL_ZH, language="zh"))
    unverified = propose(context([find_failed(), find_failed(turn=2)], goal=GOAL_ZH, language="zh"))
    unclear = propose(context(goal="帮我订个会议室", language="zh"))

    assert no_room.outcome == unverified.outcome == "gave_up"
    assert no_room.message == "该时段没有可容纳 3 人、带投影仪的会议室，换个时间试试？"
    assert unverified.message == "无法核实空闲情况（查询会议室没有响应），本次没有预订。"
    assert unclear.outcome == "ask_user"
    assert unclear.message == "能告诉我日期、时间（开始和结束）和人数吗？"


def test_once_a_reservation_succeeded_it_is_done_without_proposals():
    step = propose(context([found(room("R7", 4, version=17)), reserved("R7", 17, CONFIRMED)]))

    assert step == Step(outcome="done")


def test_a_success_after_an_earlier_conflict_is_still_done():
    history = [
        found(room("R7", 4, version=17), room("R9", 6, version=2)),
        reserved("R7", 17, CONFLICT),
        found(room("R9", 6, version=2), turn=3),
        reserved("R9", 2, CONFIRMED, turn=4),
    ]

    assert propose(context(history)) == Step(outcome="done")
