"""No answer from a partial set (issue 36): the assistant's "you have no bookings then", "I
cancelled nothing" and "free" come from the whole set, read through real runs (the runtime's
gate, execution and output cap, the Celery worker), for a person with 300 bookings and a site
with 500 rooms; where a set is too large to read in one answer, the reply says it read part."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from bookings.models import Booking, BookingStatus
from tests.bookings.assistant.harness import at, run_conversation_live, users
from tests.bookings.factories import (
    booking_create,
    person_with_bookings,
    room_create,
    site_with_rooms,
)
from tests.conftest import SHANGHAI

pytestmark = pytest.mark.integration

TOTAL = 300


def _person_with_target(asker, position: int):
    """``asker`` with TOTAL bookings; the one at 09:00 on a day of its own is the
    ``position``-th (2 or more) list_my_bookings lists (newest first). Another booking that
    day, at 14:00, is the newest of all. Returns (target, other booking that day, the day)."""
    day = (at(_today(), "09:00") + timedelta(days=40)).date()
    person_with_bookings(asker, TOTAL - position, room=room_create())
    target = booking_create(
        requester=asker, room="R7", start_at=at(day, "09:00"), end_at=at(day, "10:00")
    )
    person_with_bookings(asker, position - 2, room=room_create())
    other = booking_create(
        requester=asker, room="R3", start_at=at(day, "14:00"), end_at=at(day, "15:00")
    )
    listed = list(Booking.objects.filter(requester=asker).order_by("-id"))
    assert len(listed) == TOTAL and listed[position - 1] == target and listed[0] == other
    return target, other, day


def _today():
    from datetime import datetime

    return datetime.now(SHANGHAI).date()


@pytest.mark.parametrize("position", [26, 60, 300])
def test_what_have_i_booked_on_a_day_finds_the_nth_booking(worker, position):
    asker, _ = users()
    target, other, day = _person_with_target(asker, position)

    (answer,) = run_conversation_live(asker, [f"what have I booked on {day.isoformat()}?"])

    assert answer.outcome == "answered", answer.reply
    assert target.code in answer.reply and other.code in answer.reply, answer.reply
    assert "no bookings" not in answer.reply


@pytest.mark.parametrize("position", [26, 60, 300])
def test_cancel_my_booking_on_a_day_at_9am_cancels_the_nth_booking(worker, position):
    asker, _ = users()
    target, other, day = _person_with_target(asker, position)

    (answer,) = run_conversation_live(asker, [f"cancel my booking on {day.isoformat()} at 9am"])

    assert answer.outcome == "succeeded", answer.reply
    statuses = dict(Booking.objects.values_list("code", "status"))
    assert statuses[target.code] == BookingStatus.CANCELLED
    assert statuses[other.code] == BookingStatus.CONFIRMED
    cancelled = [c for c, s in statuses.items() if s == BookingStatus.CANCELLED]
    assert cancelled == [target.code], answer.reply


def test_show_me_my_bookings_says_when_it_read_only_part(worker):
    """More upcoming bookings than a run reads: the answer says so, and never lists a part
    as all of them."""
    asker, _ = users()
    person_with_bookings(asker, TOTAL, room=room_create())

    (answer,) = run_conversation_live(asker, ["show me my bookings"])

    assert answer.outcome == "answered", answer.reply
    assert "more bookings than I can" in answer.reply, answer.reply
    assert "My bookings" in answer.reply


def _free_times(reply: str, label: str) -> str:
    found = re.search(re.escape(label) + r": ([0-9:–, ]+)", reply)
    assert found, f"{label} not in {reply!r}"
    return found.group(1).strip(" ,")


def _tomorrow():
    return _today() + timedelta(days=1)


def test_a_named_room_of_a_500_room_site_is_free_all_afternoon(worker):
    asker, other = users()
    site_with_rooms(500)  # R1000..R1499, all alike: R1499 sorts last on every page
    day = _tomorrow()
    booking_create(
        requester=other, room="R1499", start_at=at(day, "10:00"), end_at=at(day, "11:00")
    )

    (answer,) = run_conversation_live(asker, ["when is R1499 free tomorrow afternoon?"])

    assert answer.outcome == "answered", answer.reply
    assert _free_times(answer.reply, "Room 1499 (R1499)") == "12:00–18:00", answer.reply


def test_a_room_free_all_afternoon_past_the_first_page_is_free_all_afternoon(worker):
    """The issue's R16: on a site where more rooms fit than one page lists, the largest room,
    free all afternoon, was reported free only in the hours when enough smaller rooms were
    taken to bring it onto the first page."""
    asker, other = users()
    small = site_with_rooms(500)  # seat 4: none of them fits 6
    fitting = site_with_rooms(16, first_code=2000, capacity=6)  # fit 6, sort before R16
    day = _tomorrow()
    for room in fitting:
        booking_create(
            requester=other, room=room, start_at=at(day, "14:00"), end_at=at(day, "16:00")
        )
    assert small

    (answer,) = run_conversation_live(
        asker, ["which rooms are free tomorrow afternoon for 6 people?"]
    )

    assert answer.outcome == "answered", answer.reply
    assert _free_times(answer.reply, "Summit (R16)") == "12:00–18:00", answer.reply
    assert _free_times(answer.reply, "Room 2015 (R2015)") == "12:00–14:00, 16:00–18:00"
    assert "more rooms" not in answer.reply.lower()  # every fitting room was read


def test_which_rooms_are_free_on_a_500_room_site_says_it_listed_only_some(worker):
    asker, _ = users()
    site_with_rooms(500)

    (answer,) = run_conversation_live(asker, ["which rooms are free tomorrow afternoon?"])

    assert answer.outcome == "answered", answer.reply
    assert "No room is free" not in answer.reply
    assert "more rooms" in answer.reply.lower(), answer.reply  # not all of them, it says
    for times in re.findall(r"\(?R\d+\)?: ([0-9:–, ]+)", answer.reply):
        assert times.strip(" ,") == "12:00–18:00", answer.reply  # none understated


# --- a named room: its own answer, wherever it sorts among the free ones ---------------------------


def test_booking_a_named_room_past_the_first_page_books_it(worker):
    asker, _ = users()
    site_with_rooms(500)

    (answer,) = run_conversation_live(asker, ["book R1499 tomorrow 2-3pm for 2 people"])

    assert answer.outcome == "succeeded", answer.reply
    booked = Booking.objects.get(requester=asker)
    assert (booked.room.code, booked.during.lower) == ("R1499", at(_tomorrow(), "14:00"))


def test_two_named_rooms_past_the_first_page_are_both_booked(worker):
    asker, _ = users()
    site_with_rooms(500)

    (answer,) = run_conversation_live(asker, ["book R1498 and R1499 tomorrow 2-3pm"])

    assert answer.outcome == "succeeded", answer.reply
    rooms = Booking.objects.filter(requester=asker, status=BookingStatus.CONFIRMED)
    assert sorted(rooms.values_list("room__code", flat=True)) == ["R1498", "R1499"]


def test_moving_a_booking_into_a_named_room_past_the_first_page_moves_it(worker):
    asker, _ = users()
    site_with_rooms(500)
    day = _tomorrow()
    mine = booking_create(
        requester=asker, room="R3", start_at=at(day, "10:00"), end_at=at(day, "11:00")
    )

    (answer,) = run_conversation_live(asker, [f"move {mine.code} to R1499"])

    assert answer.outcome == "succeeded", answer.reply
    mine.refresh_from_db()
    assert (mine.room.code, mine.during.lower) == ("R1499", at(day, "10:00"))


def test_what_the_assistant_reads_for_one_answer_fits_a_runs_budgets():
    """A read the budget refuses would end the answer as a failure: the assistant's own bounds
    on reading (bookings.assistant.jobs) stay within the runtime's default budgets."""
    from agentops.runtime.timing import DEFAULT_BUDGETS
    from bookings.assistant import jobs

    reads, pages = jobs.READ_CALLS, jobs.LIST_PAGES
    assert reads <= min(DEFAULT_BUDGETS.max_tool_calls, DEFAULT_BUDGETS.max_proposals)
    assert pages < DEFAULT_BUDGETS.max_turns  # one more turn answers
