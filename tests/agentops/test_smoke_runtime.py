from __future__ import annotations

import pytest

from agentops.runs import run_start
from bookings.models import Booking
from tests.agentops.conftest import wait_for_run

pytestmark = pytest.mark.integration


def test_normal_booking_run(worker, e17):
    run = run_start(
        user=e17, request_text="book a room tomorrow 14:00-15:00 for 3 people with a projector"
    )
    run = wait_for_run(run.pk)
    events = list(run.events.values_list("kind", flat=True))
    print(events, run.reply)
    assert run.status == "succeeded", (run.outcome, run.reply, events)
    booking = Booking.objects.get()
    assert booking.room.code == "R7"
    assert booking.code in run.reply
