"""A conversation read as one request (bookings.assistant.parsing.reading): follow-ups answer the
question asked, and the delegation is rebuilt from the whole conversation, never wider than what
the person said."""

from __future__ import annotations

from datetime import datetime

import pytest

from agentops.contract import ConversationTurn
from bookings.demo import ROOMS
from bookings.tools import ASSISTANT
from tests.conftest import SHANGHAI

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=SHANGHAI)  # a Tuesday


@pytest.fixture
def demo_rooms(db):
    from tests.bookings.factories import room_create

    for code, name, capacity, equipment, dept, floor, notes, bookable, approval in ROOMS:
        room_create(
            code,
            name=name,
            capacity=capacity,
            equipment=equipment,
            department=dept,
            floor=floor,
            notes=notes,
            bookable=bookable,
            requires_approval=approval,
        )


def turns(*pairs: tuple[str, str]) -> list[ConversationTurn]:
    """Earlier turns as the runtime passes them: each with what read_request understood."""
    conversation: list[ConversationTurn] = []
    for request, reply in pairs:
        reading = ASSISTANT.read_request(request, now=NOW, conversation=conversation)
        conversation.append(ConversationTurn(request, reply, reading.understood, "asked"))
    return conversation


def test_a_number_answers_how_many_people(demo_rooms):
    earlier = turns(("book Maple tomorrow 2-3pm", "Could you tell me for how many people?"))
    reading = ASSISTANT.read_request("4", now=NOW, conversation=earlier)

    delegation = reading.delegation
    assert (delegation.max_writes, delegation.resource, delegation.attendees) == (1, "R3", 4)
    assert delegation.window[0].isoformat() == "2026-12-02T14:00:00+08:00"


def test_the_same_number_alone_grants_nothing(demo_rooms):
    reading = ASSISTANT.read_request("4", now=NOW)

    assert reading.delegation.max_writes == 0


def test_yes_to_an_availability_answer_with_several_rooms_books_nothing(demo_rooms):
    earlier = turns(
        (
            "which rooms are free tomorrow 3-4pm for 4?",
            "Free then for 4 people: Maple (R3), Bamboo (R7) and Pine (R9). I booked nothing: "
            "say which one to book.",
        )
    )
    vague = ASSISTANT.read_request("yes", now=NOW, conversation=earlier)
    second = ASSISTANT.read_request("the second one", now=NOW, conversation=earlier)

    assert vague.delegation.max_writes == 0
    assert (second.delegation.max_writes, second.delegation.resource) == (1, "R7")


def test_a_correction_changes_only_the_day(demo_rooms):
    earlier = turns(
        (
            "明天下班前订个会议室 3人",
            "我把“下班前/一天结束时”理解为 17:00–18:00。我理解为：…，3 人。要我订吗？",
        )
    )
    corrected = ASSISTANT.read_request("不是明天，是后天", now=NOW, conversation=earlier)
    assert corrected.delegation.max_writes == 0  # the new reading is confirmed first

    confirmed = ASSISTANT.read_request(
        "好的",
        now=NOW,
        conversation=[
            *earlier,
            ConversationTurn("不是明天，是后天", "…要我订吗？", corrected.understood, "asked"),
        ],
    )
    delegation = confirmed.delegation
    assert delegation.max_writes == 1 and delegation.attendees == 3
    assert delegation.window[0].isoformat() == "2026-12-03T17:00:00+08:00"


def test_a_correction_after_a_booking_is_a_change_and_writes_nothing(demo_rooms):
    earlier = turns(
        (
            "book maple tomorrow 2-3pm for 2",
            "Booked R3 on Wed 2 Dec 2026, 14:00–15:00, for 2. Booking B7.",
        )
    )
    earlier = [ConversationTurn(t.request, t.reply, t.understood, "succeeded") for t in earlier]
    reading = ASSISTANT.read_request("make it 4 instead", now=NOW, conversation=earlier)

    assert reading.delegation.max_writes == 0
    assert reading.understood["job"] == "move"


def test_cancelling_after_a_booking_names_that_booking(demo_rooms):
    earlier = turns(("明天下午2点到3点订maple 2人", "已为你预订 … 预订编号 B7。"))
    reading = ASSISTANT.read_request("会议室退掉吧", now=NOW, conversation=earlier)

    assert reading.delegation.max_writes == 1
    assert reading.understood["frame"]["bookings"] == ["B7"]
    assert "cancel_booking" in reading.delegation.tools
    assert "reserve_room" not in reading.delegation.tools


@pytest.mark.parametrize(
    "text",
    [
        "which rooms are free tomorrow 3-4pm for 4 people?",
        "is Bamboo available tomorrow 2-3pm?",
        "帮我看看明天下午两点到三点哪些会议室空着",
        "what did I book this week",
        "我明天有哪些预约",
        "push my 2pm back an hour",
        "book the Atlantis room tomorrow 2-3pm for 4",
        "星河会议室 明天下午两点到三点 3个人",
        "book a room for Li Wei tomorrow 2-3pm 3 people",
        "帮李伟订明天下午两点到三点的会议室 3人",
    ],
)
def test_questions_and_refusals_grant_no_write(demo_rooms, text):
    reading = ASSISTANT.read_request(text, now=NOW)

    assert reading.delegation.max_writes == 0
    assert not reading.delegation.tools & {"reserve_room", "cancel_booking"}
