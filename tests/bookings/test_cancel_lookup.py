"""cancel_booking's receipt lookup by idempotency key: found, proven absent, or unknown."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from agentops.contract import ReceiptStatus
from agentops.runtime import registry
from bookings import selectors
from bookings.errors import BookingError
from bookings.models import Booking, Room
from bookings.services import booking_cancel
from tests.bookings.factories import booking_create
from tests.conftest import slot

pytestmark = pytest.mark.usefixtures("rooms")
START, END = slot(days=3)


def lookup(key: str):
    return registry.get("cancel_booking").lookup_receipt(key)


def test_a_cancel_under_a_key_is_found_by_that_key(e17):
    booking = booking_create(requester=e17, room="R7", start_at=START, end_at=END)
    booking_cancel(user=e17, booking_code=booking.code, idempotency_key="run:3:0:compensate")

    found = lookup("run:3:0:compensate")

    assert found.status == ReceiptStatus.FOUND
    assert found.receipt["booking_id"] == booking.code
    assert found.receipt["status"] == "cancelled"


def test_a_key_no_cancel_used_is_proven_absent(e17):
    booking = booking_create(requester=e17, room="R7", start_at=START, end_at=END)
    booking_cancel(user=e17, booking_code=booking.code)  # cancelled, but under no key

    assert lookup("run:3:0:compensate").status == ReceiptStatus.ABSENT
    assert Booking.objects.get(pk=booking.pk).cancel_key == ""


def test_the_same_key_cancels_once(e17):
    booking = booking_create(requester=e17, room="R7", start_at=START, end_at=END)
    first = booking_cancel(user=e17, booking_code=booking.code, idempotency_key="k:compensate")
    version = Room.objects.get(code="R7").schedule_version

    again = booking_cancel(user=e17, booking_code=booking.code, idempotency_key="k:compensate")

    assert Room.objects.get(code="R7").schedule_version == version  # no second bump
    assert (again.cancelled_at, again.cancelled_version) == (
        first.cancelled_at,
        first.cancelled_version,
    )
    assert lookup("k:compensate").receipt["booking_id"] == booking.code


def test_a_later_cancel_under_another_key_leaves_the_first_key_on_the_booking(e17):
    booking = booking_create(requester=e17, room="R7", start_at=START, end_at=END)
    booking_cancel(user=e17, booking_code=booking.code, idempotency_key="first")
    booking_cancel(user=e17, booking_code=booking.code, idempotency_key="second")

    assert lookup("first").status == ReceiptStatus.FOUND
    # "second" wrote nothing (the booking was already cancelled): running it again is harmless.
    assert lookup("second").status == ReceiptStatus.ABSENT


@pytest.mark.django_db(transaction=True)
def test_a_cancel_still_in_flight_is_unknown(e17, monkeypatch):
    """Another transaction holds the key (a cancel that has not committed): the lookup cannot
    tell yet, and says unknown instead of guessing or hanging."""
    monkeypatch.setattr(selectors, "CANCEL_LOOKUP_WAIT_MS", 100)
    holding, done = threading.Event(), threading.Event()

    def in_flight() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["k:compensate"]
                )
                holding.set()
                done.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=in_flight)
    thread.start()
    try:
        assert holding.wait(10)
        unclear = lookup("k:compensate")
    finally:
        done.set()
        thread.join(10)

    assert unclear.status == ReceiptStatus.UNKNOWN
    assert lookup("k:compensate").status == ReceiptStatus.ABSENT  # once it let go


def test_a_key_that_cancelled_one_booking_cannot_cancel_another(e17):
    first = booking_create(requester=e17, room="R7", start_at=START, end_at=END)
    other = booking_create(requester=e17, room="R9", start_at=START, end_at=END)
    booking_cancel(user=e17, booking_code=first.code, idempotency_key="k")
    version = Room.objects.get(code="R9").schedule_version

    with pytest.raises(BookingError, match="already cancelled another booking"):
        booking_cancel(user=e17, booking_code=other.code, idempotency_key="k")

    assert Booking.objects.get(pk=other.pk).status == "confirmed"
    assert Room.objects.get(code="R9").schedule_version == version
