from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from accounts.models import AuditAction, AuditEntry
from bookings.checkin import booking_check_in, bookings_release_no_shows
from bookings.errors import BookingError
from bookings.models import Booking, BookingSeries, BookingStatus, Room
from bookings.series import SeriesMode, series_reserve
from tests.accounts.factories import PASSWORD
from tests.bookings.factories import booking_create
from tests.conftest import slot

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rooms")]


@pytest.fixture
def booking(e17):
    start, end = slot(days=1)
    return booking_create(requester=e17, room="R7", start_at=start, end_at=end)


@pytest.mark.parametrize(
    ("minutes", "code"),
    [(-11, "checkin_too_early"), (15, "checkin_too_late"), (60, "checkin_too_late")],
)
def test_check_in_outside_its_window_is_refused_and_changes_nothing(e17, booking, minutes, code):
    with pytest.raises(BookingError) as info:
        booking_check_in(
            user=e17, booking_code=booking.code, now=booking.start_at + timedelta(minutes=minutes)
        )
    assert info.value.code == code
    assert Booking.objects.get(pk=booking.pk).checked_in_at is None


@pytest.mark.parametrize("minutes", [-10, 0, 14])
def test_check_in_inside_its_window_is_kept_and_the_booking_is_not_released(e17, booking, minutes):
    now = booking.start_at + timedelta(minutes=minutes)
    booking_check_in(user=e17, booking_code=booking.code, now=now)
    assert Booking.objects.get(pk=booking.pk).checked_in_at == now
    released = bookings_release_no_shows(now=booking.start_at + timedelta(hours=2))
    assert released.codes == []
    assert Booking.objects.get(pk=booking.pk).status == BookingStatus.CONFIRMED


def test_someone_elses_booking_cannot_be_checked_in(e23, booking):
    with pytest.raises(BookingError) as info:
        booking_check_in(user=e23, booking_code=booking.code, now=booking.start_at)
    assert info.value.code == "booking_not_found"
    assert Booking.objects.get(pk=booking.pk).checked_in_at is None


def test_a_no_show_is_released_after_the_grace_with_audit_and_mail(
    e17, booking, django_capture_on_commit_callbacks
):
    e17.email = "e17@example.com"
    e17.save(update_fields=["email"])
    version = Room.objects.get(code="R7").schedule_version
    assert bookings_release_no_shows(now=booking.start_at + timedelta(minutes=14)).codes == []
    with django_capture_on_commit_callbacks(execute=True):
        released = bookings_release_no_shows(now=booking.start_at + timedelta(minutes=15))
    assert released.codes == [booking.code]
    row = Booking.objects.get(pk=booking.pk)
    assert row.status == BookingStatus.CANCELLED
    assert row.released_at == booking.start_at + timedelta(minutes=15)
    assert row.sequence == 1
    assert Room.objects.get(code="R7").schedule_version == version + 1
    entry = AuditEntry.objects.get(action=AuditAction.BOOKING_RELEASED)
    assert entry.target == f"booking:{booking.code}"
    assert entry.detail["by"] == "check-in sweeper"
    assert [m.to for m in mail.outbox] == [["e17@example.com"]]
    assert booking.code in mail.outbox[0].body
    # Released once: a second sweep finds nothing more.
    assert bookings_release_no_shows(now=booking.start_at + timedelta(hours=1)).codes == []


def test_a_room_that_opts_out_is_never_released(e17):
    Room.objects.filter(code="R9").update(checkin_required=False)
    start, end = slot(days=1)
    booking = booking_create(requester=e17, room="R9", start_at=start, end_at=end)
    assert bookings_release_no_shows(now=start + timedelta(hours=2)).codes == []
    assert Booking.objects.get(pk=booking.pk).status == BookingStatus.CONFIRMED
    with pytest.raises(BookingError, match="needs no check-in"):
        booking_check_in(user=e17, booking_code=booking.code, now=start)


def test_a_series_missing_three_in_a_row_is_released_from_then_on(e17):
    start, end = slot(days=1)
    result = series_reserve(
        user=e17,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule="FREQ=DAILY;COUNT=6",
        attendees=2,
        mode=SeriesMode.ALL,
        idempotency_key="s-miss",
    )
    codes = [b.code for b in result.booked]
    day = timedelta(days=1)
    grace = timedelta(minutes=20)
    bookings_release_no_shows(now=start + grace)  # missed 1
    booking_check_in(user=e17, booking_code=codes[1], now=start + day)  # the count starts over
    bookings_release_no_shows(now=start + 2 * day + grace)  # missed 1
    bookings_release_no_shows(now=start + 3 * day + grace)  # missed 2
    assert BookingSeries.objects.get().released_at is None
    released = bookings_release_no_shows(now=start + 4 * day + grace)  # missed 3: the rest too
    assert released.codes == [codes[4], codes[5]]
    assert released.series_released == [result.series.pk]
    statuses = dict(Booking.objects.values_list("code", "status"))
    assert [statuses[c] for c in codes] == [
        "cancelled",
        "confirmed",
        "cancelled",
        "cancelled",
        "cancelled",
        "cancelled",
    ]


def test_the_screen_checks_in_inside_the_window_only(e17, booking):
    client = Client()
    assert client.login(username="e17", password=PASSWORD)
    url = reverse("bookings:check_in", args=[booking.code])
    response = client.post(url)  # a day early
    assert response.status_code == 400
    assert "Check-in opens at" in response.content.decode()
    assert Booking.objects.get(pk=booking.pk).checked_in_at is None
