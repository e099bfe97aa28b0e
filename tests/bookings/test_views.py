from __future__ import annotations

import re
import uuid
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from bookings.models import Booking, BookingStatus, Room
from bookings.rules import KNOWN_EQUIPMENT
from tests.accounts.factories import PASSWORD
from tests.bookings.factories import booking_create
from tests.conftest import slot

# Bookings go through the runtime, whose tool threads use their own connections: they must
# see committed rows.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]

HTMX = {"HTTP_HX_REQUEST": "true"}
DASH = "\u2013"  # en dash, as the templates print time ranges
SEARCH = reverse("bookings:search")
BOOK = reverse("bookings:book")
MINE = reverse("bookings:mine")


def search_params(
    days: int = 1,
    start: str = "14:00",
    end: str = "15:00",
    attendees: int = 3,
    equipment: tuple[str, ...] = ("projector",),
) -> dict:
    day = (timezone.localdate() + timedelta(days=days)).isoformat()
    return {
        "date": day,
        "start": start,
        "end": end,
        "attendees": attendees,
        "equipment": list(equipment),
    }


def shown_version(room: str) -> int | str:
    """The version a search page shows for the room ("" for a room that does not exist)."""
    version = Room.objects.filter(code=room).values_list("schedule_version", flat=True).first()
    return "" if version is None else version


def book_data(
    room: str = "R7",
    window=None,
    attendees: int = 3,
    key: str | None = None,
    equipment: tuple[str, ...] = ("projector",),
) -> dict:
    start, end = window or slot(days=1)
    return {
        "room": room,
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": attendees,
        "equipment": list(equipment),
        "idempotency_key": key or str(uuid.uuid4()),
        "version": shown_version(room),
    }


def listed_rooms(html: str) -> list[str]:
    return re.findall(r'data-room="(R\d+)"', html)


def listed_bookings(html: str) -> list[str]:
    return re.findall(r'id="booking-(B\d+)"', html)


def snapshot() -> tuple:
    """Everything a booking write touches: booking rows and every room's schedule version."""
    bookings = list(Booking.objects.order_by("id").values_list("id", "status", "cancelled_at"))
    versions = list(Room.objects.order_by("code").values_list("code", "schedule_version"))
    return bookings, versions


def reserve(user, room: str = "R7", window=None, key: str = "seed"):
    start, end = window or slot(days=1)
    return booking_create(
        requester=user, room=room, start_at=start, end_at=end, attendees=2, idempotency_key=key
    )


@pytest.fixture
def as_e17(client, e17):
    client.force_login(e17)
    return client


# --- login, logout, layout ---


@pytest.mark.parametrize("url", [SEARCH, MINE])
def test_pages_require_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


def test_anonymous_book_post_redirects_to_login_and_writes_nothing(client):
    before = snapshot()
    response = client.post(BOOK, book_data(), **HTMX)
    # htmx would follow a 302 and swap the login page into the room card: HX-Redirect instead.
    assert response.status_code == 200
    assert response["HX-Redirect"].startswith(reverse("login"))
    assert snapshot() == before


def test_login_form_logs_in_and_lands_on_search(client, e17):
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert 'name="password"' in page.text
    response = client.post(reverse("login"), {"username": "e17", "password": PASSWORD})
    assert response.status_code == 302
    assert response["Location"] == SEARCH
    assert client.get(SEARCH).status_code == 200


def test_login_with_wrong_password_shows_error(client, e17):
    response = client.post(reverse("login"), {"username": "e17", "password": "nope"})
    assert response.status_code == 200
    assert "alert-error" in response.text
    assert "_auth_user_id" not in client.session


def test_logout_needs_post_and_ends_the_session(as_e17):
    assert as_e17.get(reverse("logout")).status_code == 405
    response = as_e17.post(reverse("logout"))
    assert response.status_code == 302
    assert response["Location"] == reverse("login")
    assert as_e17.get(SEARCH).status_code == 302


def test_layout_shows_user_nav_htmx_and_csrf_header(as_e17):
    html = as_e17.get(SEARCH).text
    assert "<strong>e17</strong>" in html
    assert "E17" in html
    assert "Engineering" in html
    assert f'href="{MINE}"' in html
    assert 'action="/logout/"' in html
    # htmx from django-htmx's static files, carrying the page's CSP nonce
    assert re.search(
        r'<script src="/static/django_htmx/htmx-2\.min\.js" defer( nonce="[^"]+")?>', html
    )
    assert '<link rel="stylesheet" href="/static/css/app.css">' in html
    token = re.search(r"""<body hx-headers='\{"X-CSRFToken": "([^"]+)"\}'>""", html)
    assert token
    assert token.group(1)


# --- search ---


def test_search_page_renders_form_with_defaults(as_e17):
    response = as_e17.get(SEARCH)
    assert response.status_code == 200
    html = response.text
    tomorrow = (timezone.localdate() + timedelta(days=1)).isoformat()
    assert f'type="date" name="date" value="{tomorrow}"' in html
    assert 'type="number" name="attendees" value="1"' in html
    for name in KNOWN_EQUIPMENT:
        assert f'type="checkbox" name="equipment" value="{name}"' in html
    assert 'hx-get="/"' in html
    assert 'hx-target="#results"' in html
    assert 'hx-push-url="true"' in html
    assert listed_rooms(html) == []


def test_htmx_search_returns_only_the_results_partial(as_e17):
    response = as_e17.get(SEARCH, search_params(), **HTMX)
    assert response.status_code == 200
    assert "HX-Request" in response["Vary"]
    html = response.text
    assert "<html" not in html
    assert 'id="search-form"' not in html
    # 3 people + projector: smallest first; R1-R3 lack a projector, R11 is not bookable.
    assert listed_rooms(html) == ["R7", "R9", "R5", "R15", "R16"]
    assert html.count('name="idempotency_key"') == 5
    keys = re.findall(r'name="idempotency_key" value="([^"]+)"', html)
    assert len(set(keys)) == 5
    assert all(uuid.UUID(k).version == 4 for k in keys)
    assert "needs approval" in html.split('data-room="R16"')[1]
    # e17 is in Engineering: R15 and R16 are Sales rooms, R16 also premium; both say so.
    assert "needs approval" not in html.split('data-room="R15"')[0]
    assert "R15 belongs to Sales" in html.split('data-room="R15"')[1]
    assert "premium" in html.split('data-room="R16"')[1]


def test_search_hides_rooms_taken_in_that_window(as_e17, e23):
    reserve(e23, room="R7", window=slot(days=1, hour=14))
    html = as_e17.get(SEARCH, search_params(), **HTMX).text
    assert listed_rooms(html) == ["R9", "R5", "R15", "R16"]


def test_full_page_search_with_query_renders_form_and_results(as_e17):
    """What a reload of the pushed URL shows."""
    html = as_e17.get(SEARCH, search_params()).text
    assert "<html" in html
    assert 'id="search-form"' in html
    assert 'name="start" value="14:00"' in html
    assert listed_rooms(html) == ["R7", "R9", "R5", "R15", "R16"]


def test_history_restore_gets_the_full_page(as_e17):
    response = as_e17.get(SEARCH, search_params(), HTTP_HX_HISTORY_RESTORE_REQUEST="true", **HTMX)
    assert "<html" in response.text


def test_room_notes_are_escaped_and_truncated(as_e17):
    Room.objects.filter(code="R7").update(notes="<script>alert(1)</script> " + "x" * 300)
    html = as_e17.get(SEARCH, search_params(), **HTMX).text
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    note = unescape(re.search(r"<q>(.*?)</q>", html, re.S).group(1))
    assert note.startswith("<script>alert(1)</script> xxx")
    assert note.endswith("x…")
    assert len(note) == 120


def test_search_with_end_before_start_shows_inline_error(as_e17):
    before = snapshot()
    response = as_e17.get(SEARCH, search_params(start="15:00", end="14:00"), **HTMX)
    assert response.status_code == 200
    assert "<html" not in response.text
    assert 'data-error-code="end_not_after_start"' in response.text
    assert "The end must be after the start." in response.text
    assert listed_rooms(response.text) == []
    assert snapshot() == before


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"start": "25:99"}, "From: Enter a valid time."),
        ({"attendees": 0}, "People: Ensure this value is greater than or equal to 1."),
        ({"equipment": ("jetpack",)}, "Select a valid choice. jetpack"),
        ({"days": -1}, "The start time is in the past."),
        ({"days": 400}, "Rooms can be booked at most 90 days ahead."),
    ],
)
def test_invalid_search_shows_inline_error_never_500(as_e17, params, expected):
    before = snapshot()
    response = as_e17.get(SEARCH, search_params(**params), **HTMX)
    assert response.status_code == 200
    assert 'class="alert alert-error"' in response.text
    assert expected in response.text
    assert listed_rooms(response.text) == []
    assert snapshot() == before


def test_search_with_no_match_says_so(as_e17):
    html = as_e17.get(SEARCH, search_params(attendees=99), **HTMX).text
    assert "No room free" in html
    assert listed_rooms(html) == []


# --- book ---


def test_book_creates_one_booking_and_same_key_books_once(as_e17, e17):
    window = slot(days=1, hour=14)
    data = book_data(window=window)
    response = as_e17.post(BOOK, data, **HTMX)
    assert response.status_code == 200
    booking = Booking.objects.get()
    assert (booking.room.code, booking.requester, booking.attendees) == ("R7", e17, 3)
    assert (booking.start_at, booking.end_at) == window
    assert booking.status == BookingStatus.CONFIRMED
    assert booking.idempotency_key == f"web:{e17.pk}:{data['idempotency_key']}"
    html = response.text
    assert "<html" not in html
    start_text = timezone.localtime(window[0]).strftime("%-d %b %H:%M")
    assert f"Booked R7, {start_text}{DASH}15:00, code <strong>{booking.code}</strong>" in html
    assert f'href="{MINE}"' in html

    before = snapshot()
    again = as_e17.post(BOOK, data, **HTMX)
    assert again.status_code == 200
    assert f"code <strong>{booking.code}</strong>" in again.text
    assert "already booked" in again.text
    assert snapshot() == before
    assert Booking.objects.count() == 1


def test_book_without_htmx_redirects_to_mine_with_message(as_e17):
    response = as_e17.post(BOOK, book_data(), follow=True)
    booking = Booking.objects.get()
    assert response.redirect_chain == [(MINE, 302)]
    assert "Booked R7, " in response.text
    assert f"code {booking.code}." in response.text
    assert listed_bookings(response.text) == [booking.code]


def test_booking_a_taken_slot_is_an_inline_conflict_and_writes_nothing(as_e17, e23):
    reserve(e23, room="R7", window=slot(days=1, hour=14))
    before = snapshot()
    response = as_e17.post(BOOK, book_data(window=slot(days=1, hour=14, minute=30)), **HTMX)
    assert response.status_code == 200
    assert 'data-error-code="slot_taken"' in response.text
    # A lost race in plain words, with free alternatives (the same room later, other rooms).
    assert "Someone booked R7 for that time a moment ago." in response.text
    assert "Here are the nearest free times." in response.text
    assert "data-alternatives" in response.text and "R3" in response.text
    assert "version" not in response.text
    assert snapshot() == before


def test_booking_a_taken_slot_without_htmx_is_409_and_writes_nothing(as_e17, e23):
    reserve(e23, room="R7", window=slot(days=1, hour=14))
    before = snapshot()
    response = as_e17.post(BOOK, book_data(window=slot(days=1, hour=14)))
    assert response.status_code == 409
    assert "<html" in response.text
    assert "Someone booked R7 for that time a moment ago." in response.text
    assert snapshot() == before


def test_reusing_a_key_for_another_room_is_refused_and_writes_nothing(as_e17):
    data = book_data()
    as_e17.post(BOOK, data, **HTMX)
    before = snapshot()
    response = as_e17.post(BOOK, {**data, "room": "R9"}, **HTMX)
    assert response.status_code == 200
    assert 'data-error-code="idempotency_key_reuse"' in response.text
    assert snapshot() == before


@pytest.mark.parametrize(
    ("change", "status", "expected"),
    [
        ({"idempotency_key": ""}, 400, "Idempotency key: This field is required."),
        ({"idempotency_key": "not-a-uuid"}, 400, "Idempotency key: Enter a valid UUID."),
        ({"start_at": "tomorrow at two"}, 400, "Start at: Enter a valid date/time."),
        ({"attendees": "three"}, 400, "Attendees: Enter a whole number."),
        ({"equipment": ["jetpack"]}, 400, "Select a valid choice. jetpack"),
        ({"room": "R99"}, 404, "There is no room R99."),
        ({"room": "R11"}, 400, "R11 cannot be booked."),
        ({"attendees": 5}, 400, "R7 holds 4 people, not 5."),
        ({"equipment": ["video"]}, 400, "R7 has no video."),
    ],
)
def test_bad_book_posts_are_refused_and_write_nothing(as_e17, change, status, expected):
    before = snapshot()
    data = {**book_data(), **change}
    inline = as_e17.post(BOOK, data, **HTMX)
    assert inline.status_code == 200
    assert 'class="alert alert-error"' in inline.text
    assert expected in inline.text
    plain = as_e17.post(BOOK, data)
    assert plain.status_code == status
    assert expected in plain.text
    assert snapshot() == before


# --- my bookings, cancel ---


def test_my_bookings_lists_only_my_bookings(as_e17, e17, e23):
    mine_a = reserve(e17, room="R7", window=slot(days=1, hour=9), key="a")
    mine_b = reserve(e17, room="R9", window=slot(days=2, hour=9), key="b")
    theirs = reserve(e23, room="R12", window=slot(days=1, hour=9), key="c")
    response = as_e17.get(MINE)
    assert response.status_code == 200
    assert listed_bookings(response.text) == [mine_a.code, mine_b.code]  # soonest first
    assert theirs.code not in response.text
    assert response.text.count("Cancel</button>") == 2


def test_my_bookings_shows_local_time_and_status(as_e17, e17):
    booking = reserve(e17, window=slot(days=1, hour=14))
    html = as_e17.get(MINE).text
    row = html.split(f'id="booking-{booking.code}"')[1].split("</tr>")[0]
    assert f"14:00{DASH}15:00" in row
    assert "Confirmed" in row
    assert f'hx-post="{reverse("bookings:cancel", args=[booking.code])}"' in row
    assert "hx-confirm=" in row


def test_my_bookings_empty_state(as_e17):
    html = as_e17.get(MINE).text
    assert "You have no bookings yet." in html


def test_cancel_with_htmx_swaps_the_row(as_e17, e17):
    booking = reserve(e17)
    version = Room.objects.get(code="R7").schedule_version
    response = as_e17.post(reverse("bookings:cancel", args=[booking.code]), **HTMX)
    assert response.status_code == 200
    html = response.text
    assert "<html" not in html
    assert html.strip().startswith(f'<tr id="booking-{booking.code}"')
    assert 'data-status="cancelled"' in html
    assert "Cancel</button>" not in html
    booking.refresh_from_db()
    assert booking.status == BookingStatus.CANCELLED
    assert booking.cancelled_by == e17
    assert Room.objects.get(code="R7").schedule_version == version + 1


def test_cancel_without_htmx_redirects_with_message(as_e17, e17):
    booking = reserve(e17)
    response = as_e17.post(reverse("bookings:cancel", args=[booking.code]), follow=True)
    assert response.redirect_chain == [(MINE, 302)]
    assert "Cancelled R7, " in response.text
    booking.refresh_from_db()
    assert booking.status == BookingStatus.CANCELLED


def test_cancelling_someone_elses_booking_is_refused_and_writes_nothing(as_e17, e23):
    theirs = reserve(e23)
    before = snapshot()
    url = reverse("bookings:cancel", args=[theirs.code])
    inline = as_e17.post(url, **HTMX)
    assert inline.status_code == 200
    assert 'data-error-code="booking_not_found"' in inline.text  # as if it did not exist
    assert "R7" not in inline.text  # nothing about their booking leaks into the row
    plain = as_e17.post(url)
    assert plain.status_code == 404
    assert f"There is no booking {theirs.code}." in plain.text
    assert snapshot() == before


def test_cancelling_an_unknown_booking_is_not_found(as_e17):
    before = snapshot()
    url = reverse("bookings:cancel", args=["B999999"])
    assert 'data-error-code="booking_not_found"' in as_e17.post(url, **HTMX).text
    assert as_e17.post(url).status_code == 404
    assert snapshot() == before


@pytest.mark.parametrize(
    "path",
    ["/bookings/B1%00/cancel/", "/bookings/%00/cancel/", "/bookings%00/", "/%00"],
)
def test_a_nul_byte_in_the_path_is_400_and_writes_nothing(as_e17, e17, path):
    reserve(e17)
    before = snapshot()
    for answer in (as_e17.post(path), as_e17.post(path, **HTMX), as_e17.get(path)):
        assert answer.status_code == 400
    assert snapshot() == before


def test_cancel_needs_post(as_e17, e17):
    booking = reserve(e17)
    assert as_e17.get(reverse("bookings:cancel", args=[booking.code])).status_code == 405
    booking.refresh_from_db()
    assert booking.status == BookingStatus.CONFIRMED


# --- CSRF ---


def test_posts_without_csrf_token_are_403_and_write_nothing(e17):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(e17)
    booking = reserve(e17, window=slot(days=3))
    before = snapshot()
    assert csrf_client.post(BOOK, book_data(), **HTMX).status_code == 403
    cancel = reverse("bookings:cancel", args=[booking.code])
    assert csrf_client.post(cancel, **HTMX).status_code == 403
    assert snapshot() == before


def test_htmx_post_with_the_body_csrf_header_is_accepted(e17):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(e17)
    html = csrf_client.get(SEARCH).text
    token = re.search(r'"X-CSRFToken": "([^"]+)"', html).group(1)
    response = csrf_client.post(BOOK, book_data(), HTTP_X_CSRFTOKEN=token, **HTMX)
    assert response.status_code == 200
    assert Booking.objects.count() == 1
