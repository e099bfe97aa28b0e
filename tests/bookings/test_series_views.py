from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from bookings.models import Booking, BookingSeries, BookingStatus
from tests.accounts.factories import PASSWORD
from tests.bookings.factories import booking_create
from tests.conftest import slot

# The series is booked through the runtime, whose tool threads use their own connections.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]

HTMX = {"HTTP_HX_REQUEST": "true"}
NEW = reverse("bookings:series_new")
BOOK = reverse("bookings:series_book")


@pytest.fixture
def as_e17(e17) -> Client:
    client = Client()
    assert client.login(username="e17", password=PASSWORD)
    return client


def params(count: int = 3, room: str = "R7", **extra) -> dict:
    day = (timezone.localdate() + timedelta(days=1)).isoformat()
    return {
        "room": room,
        "date": day,
        "start": "14:00",
        "end": "15:00",
        "attendees": 3,
        "frequency": "weekly",
        "interval": 1,
        "ends": "count",
        "count": count,
    } | extra


def test_the_form_lists_only_bookable_rooms(as_e17):
    page = as_e17.get(NEW).content.decode()
    assert '<option value="R7">' in page
    assert 'value="R11"' not in page  # not bookable


def test_preview_shows_every_occurrence_and_the_taken_one(as_e17, e23):
    start, end = slot(days=1)
    booking_create(
        requester=e23, room="R7", start_at=start + timedelta(7), end_at=end + timedelta(7)
    )
    before = Booking.objects.count()
    response = as_e17.get(NEW, params(), **HTMX)
    page = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in page  # only the preview region
    assert page.count("data-occurrence=") == 3
    assert re.findall(r'data-free="(\w+)"', page) == ["yes", "no", "yes"]
    assert 'value="free_only"' in page
    assert 'value="all"' not in page  # all-or-nothing cannot succeed: not offered
    assert e23.username not in page  # a colleague's booking is only "taken"
    assert Booking.objects.count() == before


def test_preview_of_a_premium_room_says_it_needs_approval(as_e17):
    page = as_e17.get(NEW, params(room="R16"), **HTMX).content.decode()
    assert "data-needs-approval" in page
    assert "premium room" in page


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"count": 101}, "Number of meetings"),
        ({"ends": "until", "until": ""}, "Say when the series ends"),
        ({"end": "13:00"}, "The end must be after the start."),
        ({"room": "R99"}, "Room"),
    ],
)
def test_bad_input_previews_an_error_and_writes_nothing(as_e17, extra, expected):
    before = Booking.objects.count()
    page = as_e17.get(NEW, params(**extra), **HTMX).content.decode()
    assert 'class="alert alert-error"' in page
    assert expected in page
    assert Booking.objects.count() == before


def _book(client: Client, mode: str, *, headers=HTMX, key=None, **extra):
    start, end = slot(days=1)
    data = {
        "room": "R7",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "rule": "FREQ=WEEKLY;COUNT=3",
        "attendees": 3,
        "mode": mode,
        "idempotency_key": key or str(uuid.uuid4()),
    } | extra
    return client.post(BOOK, data, **headers)


def test_book_only_the_free_ones_then_cancel_this_and_following(as_e17, e23):
    start, end = slot(days=1)
    booking_create(
        requester=e23, room="R7", start_at=start + timedelta(7), end_at=end + timedelta(7)
    )
    page = _book(as_e17, "free_only").content.decode()
    assert "Booked 2 meetings in R7." in page
    assert "1 taken time was skipped." in page
    series = BookingSeries.objects.get()
    codes = list(series.bookings.order_by("during").values_list("code", flat=True))
    assert len(codes) == 2
    detail = as_e17.get(reverse("bookings:series_detail", args=[series.pk])).content.decode()
    assert all(f'data-booking="{c}"' in detail for c in codes)
    response = as_e17.post(
        reverse("bookings:series_cancel", args=[series.pk]),
        {"from_booking": codes[1], "idempotency_key": str(uuid.uuid4())},
        **HTMX,
    )
    assert "Cancelled 1 meeting." in response.content.decode()
    assert dict(series.bookings.values_list("code", "status")) == {
        codes[0]: BookingStatus.CONFIRMED,
        codes[1]: BookingStatus.CANCELLED,
    }


def test_book_all_when_one_is_taken_is_a_conflict_page(as_e17, e23):
    start, end = slot(days=1)
    booking_create(
        requester=e23, room="R7", start_at=start + timedelta(14), end_at=end + timedelta(14)
    )
    before = Booking.objects.count()
    response = _book(as_e17, "all", headers={})
    assert response.status_code == 409
    assert "already booked at 1 of these times" in response.content.decode()
    assert Booking.objects.count() == before
    assert not BookingSeries.objects.exists()


def test_a_forged_rule_is_refused_with_400(as_e17):
    response = _book(as_e17, "all", headers={}, rule="FREQ=MINUTELY;COUNT=3")
    assert response.status_code == 400
    assert not BookingSeries.objects.exists()


def test_someone_elses_series_is_404_and_cannot_be_cancelled(as_e17, e23):
    _book(as_e17, "all")
    series = BookingSeries.objects.get()
    other = Client()
    assert other.login(username="e23", password=PASSWORD)
    assert other.get(reverse("bookings:series_detail", args=[series.pk])).status_code == 404
    response = other.post(
        reverse("bookings:series_cancel", args=[series.pk]),
        {"idempotency_key": str(uuid.uuid4())},
    )
    assert response.status_code == 404
    assert series.bookings.filter(status=BookingStatus.CONFIRMED).count() == 3


def test_this_and_the_following_shows_the_meetings_cancelled_without_a_reload(as_e17):
    """The answer swaps the page's meetings for how they are now: the cancelled ones say so and
    offer nothing more, and every button gets a new key (the page said "Confirmed" until a
    reload)."""
    _book(as_e17, "all")
    series = BookingSeries.objects.get()
    codes = list(series.bookings.order_by("during").values_list("code", flat=True))
    page = as_e17.get(reverse("bookings:series_detail", args=[series.pk])).content.decode()
    keys = set(re.findall(r'name="idempotency_key" value="([^"]+)"', page))

    answer = as_e17.post(
        reverse("bookings:series_cancel", args=[series.pk]),
        {"from_booking": codes[1], "idempotency_key": str(uuid.uuid4())},
        **HTMX,
    ).content.decode()

    assert "Cancelled 2 meetings." in answer
    assert "See the series" not in answer  # it is this page
    meetings = answer.split(
        '<div id="series-meetings" class="series-meetings" hx-swap-oob="true">', 1
    )[1]
    status = dict(re.findall(r'data-booking="(B\d+)" data-status="(\w+)"', meetings))
    assert status == {codes[0]: "confirmed", codes[1]: "cancelled", codes[2]: "cancelled"}
    assert meetings.count("This and the following") == 1  # only the confirmed one offers it
    assert not keys & set(re.findall(r'name="idempotency_key" value="([^"]+)"', meetings))
