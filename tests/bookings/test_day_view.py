"""The day view, the room week, the change screen and My bookings' cancel (through the runtime)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from datetime import timedelta
from html import unescape

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

from agentops.models import Action, ActionStatus
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


def change_fields(hour: int, room: str = "R9", **extra) -> dict:
    start, _ = slot(days=1, hour=hour)
    return {
        "room": room,
        "date": start.date().isoformat(),
        "start": f"{hour:02d}:00",
        "end": f"{hour + 1:02d}:00",
        "attendees": 2,
        "title": "",
    } | extra


def page_key(html: str) -> str:
    return re.search(r'name="idempotency_key" value="([^"]+)"', html).group(1)


def swapped_key(html: str) -> str | None:
    """The new key an htmx answer swaps into the change form (None: the form keeps its own)."""
    found = re.search(
        r'<input type="hidden" name="idempotency_key" value="([^"]+)" id="id_idempotency_key"'
        r' hx-swap-oob="true">',
        html,
    )
    return found.group(1) if found else None


def test_after_a_refused_change_the_form_has_a_new_key_and_the_next_change_is_made(
    as_e17, e17, e23
):
    """A refusal wrote nothing under its key: the form gets a new one, or every later change on
    the page was refused as "already used for a different request" until a reload."""
    booking = reserve(e17)
    reserve(e23, room="R9", hour=16, key="taken")
    url = reverse("bookings:change", args=[booking.code])
    first_key = page_key(as_e17.get(reverse("bookings:change_form", args=[booking.code])).text)
    versions = list(Room.objects.order_by("code").values_list("schedule_version", flat=True))

    refused = as_e17.post(url, change_fields(16) | {"idempotency_key": first_key}, **HTMX).text
    assert 'data-error-code="slot_taken"' in refused
    second_key = swapped_key(refused)
    assert second_key is not None and second_key != first_key
    assert Booking.objects.get(pk=booking.pk).room.code == "R7"
    assert (
        list(Room.objects.order_by("code").values_list("schedule_version", flat=True)) == versions
    )

    made = as_e17.post(url, change_fields(17) | {"idempotency_key": second_key}, **HTMX).text
    assert f'data-changed="{booking.code}"' in made
    moved = Booking.objects.get(pk=booking.pk)
    assert (moved.room.code, moved.start_at) == ("R9", slot(days=1, hour=17)[0])


def test_a_double_submit_of_a_change_still_under_way_keeps_the_forms_key(as_e17, e17):
    """The same change sent again while the first is still running is answered "in progress"
    and the form keeps its key: a third send is still the same request, never a second write."""
    booking = reserve(e17)
    url = reverse("bookings:change", args=[booking.code])
    data = change_fields(16) | {"idempotency_key": str(uuid.uuid4())}
    held, release = threading.Event(), threading.Event()
    first: dict[str, str] = {}

    def hold_the_booking() -> None:  # the first change waits for this row lock
        try:
            with transaction.atomic():
                Booking.objects.select_for_update().get(pk=booking.pk)
                held.set()
                release.wait(20)
        finally:
            connection.close()

    def send_first() -> None:
        try:
            client = Client()
            client.force_login(e17)
            first["html"] = client.post(url, data, **HTMX).text
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_booking)
    holder.start()
    assert held.wait(10)
    sender = threading.Thread(target=send_first)
    sender.start()
    try:
        running = Action.objects.filter(
            tool="change_booking",
            status=ActionStatus.RUNNING,
            idempotency_key__endswith=data["idempotency_key"],
        )
        deadline = time.monotonic() + 20
        while not running.exists():
            assert time.monotonic() < deadline, "the first change never started"
            time.sleep(0.05)
        again = as_e17.post(url, data, **HTMX).text
    finally:
        release.set()
        holder.join(30)
        sender.join(30)
    assert 'data-error-code="in_progress"' in again
    assert swapped_key(again) is None
    assert f'data-changed="{booking.code}"' in first["html"]
    assert Action.objects.filter(tool="change_booking").count() == 1


def test_the_day_view_lists_the_free_times_once_when_a_slot_was_taken(as_e17, e23):
    reserve(e23, room="R7", hour=10, key="taken")
    start, end = slot(days=1, hour=10)
    refused = as_e17.post(
        reverse("bookings:day_book"),
        {
            "room": "R7",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": 2,
            "idempotency_key": str(uuid.uuid4()),
        },
        **HTMX,
    ).text
    assert 'data-error-code="slot_taken"' in refused
    assert refused.count("data-alternatives") == 1
    assert refused.count("Free instead") == 1


def test_free_instead_on_the_change_page_moves_the_booking_being_changed(as_e17, e17, e23):
    """A free time offered after a refused change fills the change form again; saving it moves
    the booking (same code, still one booking), where it used to lead to the day view, which
    booked a second one."""
    booking = reserve(e17, title="Retro")
    reserve(e23, room="R9", hour=16, key="taken")
    url = reverse("bookings:change", args=[booking.code])
    key = page_key(as_e17.get(reverse("bookings:change_form", args=[booking.code])).text)
    refused = as_e17.post(
        url, change_fields(16, title="Retro") | {"idempotency_key": key}, **HTMX
    ).text
    offers = re.findall(r'<a class="btn btn-quiet" data-move-to="(R\d+)" href="([^"]+)"', refused)
    assert offers, refused
    assert reverse("bookings:day") not in refused.split("data-alternatives", 1)[1]
    room, link = next((room, unescape(link)) for room, link in offers if room == "R9")
    assert link.startswith(reverse("bookings:change_form", args=[booking.code]) + "?")

    page = as_e17.get(link).text
    assert "data-picked" in page
    assert re.search(r'<option value="R9" selected>', page)
    fields = {
        name: re.search(rf'name="{name}"[^>]*value="([^"]*)"', page).group(1)
        for name in ("date", "start", "end", "attendees", "title", "idempotency_key")
    }
    assert (fields["start"], fields["end"], fields["title"]) != ("16:00", "17:00", "")
    moved = as_e17.post(url, fields | {"room": room}, **HTMX).text
    assert f'data-changed="{booking.code}"' in moved
    assert '<p id="change-picked" hidden hx-swap-oob="true"></p>' in moved  # it was true before
    assert Booking.objects.filter(requester=e17).count() == 1
    after = Booking.objects.get(pk=booking.pk)
    assert after.room.code == "R9" and after.title == "Retro"
    assert after.start_at != slot(days=1, hour=16)[0]


def test_a_change_link_with_a_bad_pick_shows_the_booking_as_it_is(as_e17, e17):
    booking = reserve(e17)
    page = as_e17.get(
        reverse("bookings:change_form", args=[booking.code]),
        {"room": "R9", "date": "soon", "start": "25:00"},
    ).text
    assert "data-picked" not in page
    assert re.search(r'<option value="R7" selected>', page)


def test_in_chinese_a_rooms_department_is_named_in_chinese_in_why_it_needs_approval(as_e17):
    day = slot(days=1)[0].date().isoformat()
    html = as_e17.get(reverse("bookings:day"), {"date": day}, HTTP_ACCEPT_LANGUAGE="zh-Hans").text
    why = html.split('data-room="R12"', 1)[1].split("</th>", 1)[0]
    assert "R12 属于销售部" in why and "Sales" not in why
