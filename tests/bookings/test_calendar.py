from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from icalendar import Calendar

from bookings.calendar import calendar_token_get, calendar_token_reset
from bookings.models import CalendarToken
from bookings.series import SeriesMode, series_cancel, series_reserve
from bookings.services import booking_cancel
from tests.accounts.factories import PASSWORD
from tests.bookings.factories import booking_create
from tests.conftest import slot

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rooms")]


def events(client: Client, url: str) -> dict[str, object]:
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/calendar")
    cal = Calendar.from_ical(response.content)
    return {str(e["UID"]): e for e in cal.walk("VEVENT")}


def feed_url(user) -> str:
    return reverse("bookings:feed", args=[calendar_token_get(user=user).token])


def test_the_feed_shows_a_booking_then_its_cancellation_with_a_higher_sequence(e17):
    start, end = slot(days=1)
    booking = booking_create(requester=e17, room="R7", start_at=start, end_at=end)
    client = Client()  # a calendar app: no session
    found = events(client, feed_url(e17))
    uid = f"{booking.code}@rooms.localhost"
    event = found[uid]
    assert event["STATUS"] == "CONFIRMED"
    assert int(event["SEQUENCE"]) == 0
    assert event.decoded("DTSTART") == start
    assert event.decoded("DTEND") == end
    assert "R7" in str(event["LOCATION"])
    assert "Room R7" in str(event["LOCATION"])
    booking_cancel(user=e17, booking_code=booking.code)
    event = events(client, feed_url(e17))[uid]
    assert event["STATUS"] == "CANCELLED"
    assert int(event["SEQUENCE"]) == 1


def test_the_feed_shows_only_the_owners_bookings(e17, e23):
    start, end = slot(days=1)
    mine = booking_create(requester=e17, room="R7", start_at=start, end_at=end)
    theirs = booking_create(requester=e23, room="R9", start_at=start, end_at=end)
    found = events(Client(), feed_url(e17))
    assert f"{mine.code}@rooms.localhost" in found
    assert f"{theirs.code}@rooms.localhost" not in found


def test_a_series_change_moves_the_sequence_of_the_cancelled_occurrences(e17):
    start, end = slot(days=1)
    result = series_reserve(
        user=e17,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule="FREQ=DAILY;COUNT=3",
        attendees=2,
        mode=SeriesMode.ALL,
        idempotency_key="s-cal",
    )
    codes = [b.code for b in result.booked]
    series_cancel(
        user=e17, series_id=result.series.pk, from_booking=codes[1], idempotency_key="s-cal-c"
    )
    found = events(Client(), feed_url(e17))
    states = [
        (
            str(found[f"{c}@rooms.localhost"]["STATUS"]),
            int(found[f"{c}@rooms.localhost"]["SEQUENCE"]),
        )
        for c in codes
    ]
    assert states == [("CONFIRMED", 0), ("CANCELLED", 1), ("CANCELLED", 1)]


def test_resetting_the_link_closes_the_old_one(e17):
    old = feed_url(e17)
    calendar_token_reset(user=e17)
    assert Client().get(old).status_code == 404
    assert Client().get(feed_url(e17)).status_code == 200
    assert CalendarToken.objects.count() == 1


def test_an_unknown_token_is_404():
    assert Client().get(reverse("bookings:feed", args=["nope"])).status_code == 404


def test_one_bookings_ics_is_its_owners_only(e17, e23):
    start, end = slot(days=1)
    booking = booking_create(requester=e17, room="R7", start_at=start, end_at=end)
    url = reverse("bookings:booking_ics", args=[booking.code])
    owner = Client()
    assert owner.login(username="e17", password=PASSWORD)
    assert list(events(owner, url)) == [f"{booking.code}@rooms.localhost"]
    other = Client()
    assert other.login(username="e23", password=PASSWORD)
    assert other.get(url).status_code == 404
    assert Client().get(url).status_code == 302  # to the login page


def test_the_section_creates_and_resets_the_link(e17):
    client = Client()
    assert client.login(username="e17", password=PASSWORD)
    page = client.get(reverse("bookings:calendar"), HTTP_HX_REQUEST="true").content.decode()
    assert "Create my calendar link" in page
    assert not CalendarToken.objects.exists()
    page = client.post(reverse("bookings:calendar_reset"), HTTP_HX_REQUEST="true").content.decode()
    token = CalendarToken.objects.get(user=e17).token
    assert f"/calendar/feed/{token}.ics" in page
    assert "Reset link" in page
    client.post(reverse("bookings:calendar_reset"))
    assert CalendarToken.objects.get(user=e17).token != token


def test_a_changed_booking_keeps_its_uid_and_moves_its_sequence_and_time(e17):
    from bookings.models import Room
    from bookings.services import booking_change

    start, end = slot(days=1, hour=9)
    booking = booking_create(requester=e17, room="R7", start_at=start, end_at=end)
    later, later_end = slot(days=1, hour=15)
    booking_change(
        user=e17,
        booking_code=booking.code,
        idempotency_key="move-1",
        room_code="R9",
        start_at=later,
        end_at=later_end,
        expected_version=Room.objects.get(code="R9").schedule_version,
    )

    event = events(Client(), feed_url(e17))[f"{booking.code}@rooms.localhost"]
    assert int(event["SEQUENCE"]) == 1
    assert event.decoded("DTSTART") == later
    assert "R9" in str(event["LOCATION"])
