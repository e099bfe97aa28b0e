"""The verifier's reply when no write was confirmed: "Nothing was booked" only when the
request's delegation granted a write; an answer, a list or a question of a read-only request
is the planner's own words (a real worker, the scripted model)."""

from __future__ import annotations

import pytest

from agentops.runtime.runs import run_start
from bookings.models import Booking
from tests.workers import wait_for_run

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

BOOK = "book R7 tomorrow 14:00-15:00 for 3 people"  # the reading grants one write
ASK = "what did I book this week?"  # a list: read only


def _run(user, text: str, outcome: str, message: str, scope: dict | None = None):
    before = Booking.objects.count()
    script = [{"message": message, "outcome": outcome}]
    run = wait_for_run(
        run_start(user=user, request_text=text, model="scripted", script=script, scope=scope).pk
    )
    assert Booking.objects.count() == before
    return run


@pytest.mark.parametrize("outcome", ["ask_user", "gave_up"])
def test_a_read_only_request_that_ends_without_a_write_is_answered_in_the_planners_words(
    worker, e17, outcome
):
    run = _run(e17, ASK, outcome, "The calendar did not answer; try again in a minute.")

    assert run.delegation["max_writes"] == 0
    assert run.reply == "The calendar did not answer; try again in a minute."
    assert run.outcome == outcome


def test_a_request_narrowed_to_no_writes_does_not_say_nothing_was_booked(worker, e17):
    run = _run(e17, BOOK, "gave_up", "R7 is taken then.", scope={"max_writes": 0})

    assert run.delegation["max_writes"] == 0
    assert run.reply == "R7 is taken then."


def test_a_booking_request_that_booked_nothing_says_so(worker, e17):
    run = _run(e17, BOOK, "gave_up", "R7 is taken then.")

    assert run.delegation["max_writes"] == 1
    assert run.reply == "Nothing was booked. R7 is taken then."
    assert run.status == "failed"


def test_a_read_only_request_with_nothing_to_say_still_says_nothing_was_done(worker, e17):
    run = _run(e17, ASK, "gave_up", "")

    assert run.reply.startswith("Nothing was booked")
