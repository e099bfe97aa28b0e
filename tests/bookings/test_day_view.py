"""The day view, the room week, the change screen and My bookings' cancel (through the runtime)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from agentops.models import Action
from bookings.models import Booking, Room
from bookings.services import booking_reserve
from tests.conftest import slot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]
HTMX = {"HTTP_HX_REQUEST": "true"}


def reserve(user, room="R7", hour=14, key="k", title=""):
    start, end = slot(days=1, hour=hour)
    return booking_reserve(
        user=user,
        room_code=room,
        start_at=start,
        end_at=end,
        attendees=2,
        idempotency_key=key,
        title=title,
    ).booking


@pytest.fixture
def as_e17(e17) -> Client:
    client = Client()
    client.force_login(e17)
    return client


def test_the_day_shows_my_booking_with_its_title_and_others_only_as_busy(as_e17, e17, e23):
    reserve(e17, title="<script>alert(1)</script> Retro", key="a")
    reserve(e23, room="R9", title="Secret layoffs", key="b")
    day = slot(days=1)[0].date().isoformat()
    html = as_e17.get(reverse("bookings:day"), {"date": day}).text
    assert (
        'class="cell cell-mine"' in html and "&lt;script&gt;alert(1)&lt;/script&gt; Retro" in html
    )
    assert "<script>alert(1)" not in html
    assert "Secret layoffs" not in html and "e23" not in html
    assert 'class="cell cell-busy"' in html
    assert Booking.objects.get(room__code="R9").code not in html
    assert 'ws-connect="/ws/schedule/?day=' in html


def test_filters_narrow_the_rooms_and_the_grid_is_a_partial_for_htmx(as_e17):
    day = slot(days=1)[0].date().isoformat()
    response = as_e17.get(
        reverse("bookings:day"), {"date": day, "attendees": 10, "equipment": ["video"]}, **HTMX
    )
    assert "<html" not in response.text
    rooms = {r for r in ("R7", "R15", "R16", "R5") if f'data-room="{r}"' in response.text}
    assert rooms == {"R15", "R16"}
    assert "premium" in response.text.split('data-room="R16"')[1]


def test_bad_filters_are_a_clear_error_not_a_500(as_e17):
    response = as_e17.get(reverse("bookings:day"), {"date": "tomorrow", "attendees": "-3"})
    assert response.status_code == 200
    assert 'data-error-code="bad_form"' in response.text


def test_a_free_cell_opens_the_booking_form_and_books_through_the_runtime(as_e17, e17):
    start, _ = slot(days=1, hour=10)
    panel = as_e17.get(
        reverse("bookings:day_slot"), {"room": "R7", "start": start.isoformat(), "attendees": 2}
    ).text
    assert 'name="end_at"' in panel and "autofocus" in panel
    end = start + timedelta(hours=1)
    response = as_e17.post(
        reverse("bookings:day_book"),
        {
            "room": "R7",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": 2,
            "idempotency_key": "0b4f6d8e-9a7c-4d0e-8f1a-2b3c4d5e6f70",
            "title": "Standup",
        },
        **HTMX,
    )
    assert response["HX-Trigger"] == "schedule-changed"
    booking = Booking.objects.get()
    assert (booking.room.code, booking.title, booking.requester) == ("R7", "Standup", e17)
    assert Action.objects.get(tool="reserve_room").status == "succeeded"


def test_a_second_room_at_the_same_time_asks_first(as_e17, e17):
    reserve(e17, room="R7", hour=10, key="a")
    start, end = slot(days=1, hour=10)
    data = {
        "room": "R9",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": 2,
        "idempotency_key": "0b4f6d8e-9a7c-4d0e-8f1a-2b3c4d5e6f71",
    }
    versions = list(Room.objects.order_by("code").values_list("schedule_version", flat=True))
    refused = as_e17.post(reverse("bookings:day_book"), data, **HTMX).text
    assert 'data-error-code="second_room"' in refused and "You already hold R7" in refused
    assert Booking.objects.count() == 1 and Action.objects.count() == 0
    assert (
        list(Room.objects.order_by("code").values_list("schedule_version", flat=True)) == versions
    )
    as_e17.post(reverse("bookings:day_book"), data | {"another_room": "on"}, **HTMX)
    assert set(Booking.objects.values_list("room__code", flat=True)) == {"R7", "R9"}


def test_the_room_week_shows_seven_days(as_e17):
    html = as_e17.get(reverse("bookings:room_week", args=["R7"])).text
    assert html.count('data-room="R7" data-day=') == 7
    assert as_e17.get(reverse("bookings:room_week", args=["R404"])).status_code == 404


def test_a_room_week_says_once_above_the_days_that_the_room_needs_approval_and_why(as_e17):
    sales = as_e17.get(reverse("bookings:room_week", args=["R12"])).text
    own = as_e17.get(reverse("bookings:room_week", args=["R7"])).text

    assert sales.count("data-room-approval") == 1
    assert sales.count("needs approval") == 1  # not again on each of the seven days
    note = sales.split("data-room-approval", 1)[1].split("</p>", 1)[0]
    assert "Sales" in note and "Nothing is booked until an approver agrees." in note
    assert "4 seats" in sales and "whiteboard" in sales.split("room-facts", 1)[1].split("</p>")[0]
    assert "data-room-approval" not in own and "needs approval" not in own


def test_cancel_from_my_bookings_is_an_action_with_its_trace(as_e17, e17):
    booking = reserve(e17)
    response = as_e17.post(
        reverse("bookings:cancel", args=[booking.code]), {"idempotency_key": "x1"}, **HTMX
    )
    assert response.status_code == 200
    booking.refresh_from_db()
    assert booking.status == "cancelled"
    action = Action.objects.get(tool="cancel_booking")
    assert action.status == "succeeded" and action.run.subject == e17
    # Its trace: the gate's decision and the call's outcome (a direct call records no
    # verification event yet: see the report).
    assert {"gate", "execution_finished"} <= set(action.run.events.values_list("kind", flat=True))


def test_the_change_screen_moves_the_booking_and_keeps_its_code(as_e17, e17):
    booking = reserve(e17)
    page = as_e17.get(reverse("bookings:change_form", args=[booking.code])).text
    assert 'name="idempotency_key"' in page
    start, _ = slot(days=1, hour=16)
    response = as_e17.post(
        reverse("bookings:change", args=[booking.code]),
        {
            "room": "R9",
            "date": start.date().isoformat(),
            "start": "16:00",
            "end": "17:00",
            "attendees": 2,
            "title": "Moved",
            "idempotency_key": "0b4f6d8e-9a7c-4d0e-8f1a-2b3c4d5e6f72",
        },
        **HTMX,
    )
    assert f'data-changed="{booking.code}"' in response.text
    moved = Booking.objects.get()
    assert (moved.code, moved.room.code, moved.title) == (booking.code, "R9", "Moved")
    mine = as_e17.get(reverse("bookings:mine")).text
    assert "Moved" in mine and "run detail" not in mine


def test_after_a_change_the_screen_shows_the_new_time_and_a_second_change_is_its_own(as_e17, e17):
    """The page stays after an htmx save: its "Now:" line is swapped for the changed booking,
    and the form gets a new key, so changing again is a second write, not a replay of the first."""
    booking = reserve(e17)
    page = as_e17.get(reverse("bookings:change_form", args=[booking.code])).text
    first_key = re.search(r'name="idempotency_key" value="([^"]+)"', page).group(1)
    start, _ = slot(days=1, hour=16)
    fields = {
        "room": "R9",
        "date": start.date().isoformat(),
        "start": "16:00",
        "end": "17:00",
        "attendees": 2,
        "title": "Moved",
    }
    url = reverse("bookings:change", args=[booking.code])
    response = as_e17.post(url, fields | {"idempotency_key": first_key}, **HTMX).text

    now = re.search(r'<span id="change-now" hx-swap-oob="true">(.*?)</span>', response, re.S)
    assert now and "R9" in now.group(1) and "16:00" in now.group(1)
    second_key = re.search(
        r'<input type="hidden" name="idempotency_key" value="([^"]+)" id="id_idempotency_key"'
        r' hx-swap-oob="true">',
        response,
    ).group(1)
    assert second_key != first_key

    fields |= {"start": "17:00", "end": "18:00"}
    again = as_e17.post(url, fields | {"idempotency_key": second_key}, **HTMX).text
    assert f'data-changed="{booking.code}"' in again
    moved = Booking.objects.get()
    assert (moved.room.code, moved.start_at) == ("R9", slot(days=1, hour=17)[0])
