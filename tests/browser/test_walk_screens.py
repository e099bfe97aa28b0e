"""The browser walk's defects (issue 36, item 6), in real Chromium against the real ASGI server
(websockets and all), as e17 at 1280 px and on a 390 px touch phone: the day view and a room's
week fit the screen and the panel's Book button can be tapped; a refused change leaves the page
able to change again, and "Free instead" moves the booking being changed; a request that waits
for an approver appears on an open My bookings; "This and the following" shows the meetings
cancelled on the series page, and an open day view drops them. Screenshots of each state land in
var/artifacts/ (walk-*-<width>.png)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.utils import timezone

from approvals.models import ApprovalRequest
from bookings.models import Booking, BookingStatus
from bookings.series import SeriesMode, series_reserve
from bookings.services import booking_request, booking_reserve
from tests.browser.conftest import ROOT, browsing
from tests.conftest import slot

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]

SHOTS = ROOT / "var" / "artifacts"
WIDTHS = (1280, 390)
PHONE = 390


def device(width: int) -> dict:
    """Browser context options: a desk's window, or a touch phone (whose page grows wider than
    its screen when something overflows, instead of scrolling a box)."""
    if width == PHONE:
        return {"viewport": {"width": width, "height": 844}, "is_mobile": True, "has_touch": True}
    return {"viewport": {"width": width, "height": 900}}


def press(locator, width: int) -> None:
    locator.tap() if width == PHONE else locator.click()


def fits(page, width: int) -> None:
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= width, f"the page is {wide} px wide on a {width} px screen"


def shot(page, name: str, width: int) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"walk-{name}-{width}.png"), full_page=True)


def off_the_loop(fn, **kwargs):
    """Call ``fn`` on another thread with its own database connection (Playwright's loop owns
    this one, and a write's live push needs a loop of its own)."""

    def call():
        try:
            return fn(**kwargs)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result(timeout=30)


def reserve(user, room: str, hour: int, title: str = "") -> Booking:
    start, end = slot(days=1, hour=hour)
    return booking_reserve(
        user=user,
        room_code=room,
        start_at=start,
        end_at=end,
        attendees=2,
        idempotency_key=str(uuid.uuid4()),
        title=title,
    ).booking


def htmx_ready(page) -> None:
    page.wait_for_function("() => window.htmx !== undefined")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_day_view_and_a_rooms_week_fit_the_screen_and_the_panel_books(
    e17, e23, asgi_server, width
):
    """Busy and own cells carry hidden labels; they widened the page past a phone's screen,
    where the panel's Book button then could not be tapped."""
    from playwright.sync_api import expect

    mine = reserve(e17, "R1", 10, title="Standup")
    for room, hour in (("R7", 9), ("R7", 15), ("R9", 11), ("R16", 13)):
        reserve(e23, room, hour)
    start, _ = slot(days=1, hour=14)
    day = start.date().isoformat()
    with browsing(asgi_server, e17, **device(width)) as context:
        page = context.new_page()
        page.goto(f"/day/?date={day}")
        htmx_ready(page)
        expect(page.locator(f'td.cell-mine[data-booking="{mine.code}"]')).to_be_visible()
        fits(page, width)
        shot(page, "day", width)

        press(page.locator(f"#cell-R2-{start:%Y%m%d}-1400"), width)
        book = page.locator('#panel button[type="submit"]')
        expect(book).to_be_visible()
        fits(page, width)
        shot(page, "day-panel", width)
        press(book, width)
        expect(page.locator("#outcome [data-booking]")).to_be_visible()
        booked = Booking.objects.get(room__code="R2", requester=e17)
        assert booked.start_at == start
        expect(page.locator(f'td.cell-mine[data-booking="{booked.code}"]')).to_be_visible()

        page.goto(f"/day/room/R7/?date={day}")
        htmx_ready(page)
        expect(page.locator("td.cell-busy")).to_have_count(2)
        fits(page, width)
        shot(page, "room-week", width)


@pytest.mark.parametrize("width", WIDTHS)
def test_after_a_refused_change_the_page_changes_again_and_free_instead_moves_it(
    e17, e23, asgi_server, width
):
    from playwright.sync_api import expect

    booking = reserve(e17, "R7", 14, title="Retro")
    reserve(e23, "R9", 16)
    with browsing(asgi_server, e17, **device(width)) as context:
        page = context.new_page()
        page.goto(f"/bookings/{booking.code}/change/")
        htmx_ready(page)
        save = page.get_by_role("button", name="Save the change")

        # Refused: R9 is taken at 16:00. Then a second change on the same page is made.
        page.locator("#change-room").select_option("R9")
        page.locator('input[name="start"]').fill("16:00")
        page.locator('input[name="end"]').fill("17:00")
        press(save, width)
        expect(page.locator('#change-outcome [data-error-code="slot_taken"]')).to_be_visible()
        expect(page.locator("#change-outcome [data-alternatives]")).to_have_count(1)
        fits(page, width)
        shot(page, "change-refused", width)
        page.locator('input[name="start"]').fill("18:00")
        page.locator('input[name="end"]').fill("19:00")
        press(save, width)
        expect(page.locator(f'[data-changed="{booking.code}"]')).to_be_visible()
        moved = Booking.objects.get(pk=booking.pk)
        assert (moved.room.code, moved.start_at) == ("R9", slot(days=1, hour=18)[0])

        # Refused again; "Free instead" fills the form, and saving it moves the same booking.
        page.locator('input[name="start"]').fill("16:00")
        page.locator('input[name="end"]').fill("17:00")
        press(save, width)
        offer = page.locator('#change-outcome [data-move-to="R9"]').first
        expect(offer).to_be_visible()
        press(offer, width)
        expect(page.locator("[data-picked]")).to_be_visible()
        expect(page.locator("#change-room")).to_have_value("R9")
        picked = page.locator('input[name="start"]').input_value()
        assert picked not in {"16:00", ""}
        fits(page, width)
        shot(page, "change-picked", width)
        press(save, width)
        expect(page.locator(f'[data-changed="{booking.code}"]')).to_be_visible()
        expect(page.locator("[data-picked]")).to_have_count(0)  # said before the save only
        shot(page, "change-moved", width)
    after = Booking.objects.get(pk=booking.pk)
    at = timezone.localtime(after.start_at)
    assert (after.room.code, f"{at:%H:%M}", after.title) == ("R9", picked, "Retro")
    assert Booking.objects.filter(requester=e17).count() == 1


@pytest.mark.parametrize("width", WIDTHS)
def test_my_bookings_shows_a_new_request_that_waits_for_an_approver_without_a_reload(
    e17, asgi_server, width
):
    from playwright.sync_api import expect

    start, end = slot(days=2, hour=10)
    with browsing(asgi_server, e17, **device(width)) as context:
        page = context.new_page()
        page.goto("/bookings/")
        page.wait_for_function("() => document.body.dataset.bookingsLive === 'open'")
        page.evaluate("window.stillTheSamePage = true")
        expect(page.locator("tr[data-request]")).to_have_count(0)
        outcome = off_the_loop(
            booking_request,
            user=e17,
            room_code="R16",
            start_at=start,
            end_at=end,
            attendees=3,
            idempotency_key=str(uuid.uuid4()),
        )
        assert outcome.kind == "pending"
        request = ApprovalRequest.objects.get(requester=e17)
        row = page.locator(f'tr[data-request="{request.pk}"]')
        expect(row).to_have_attribute("data-status", "pending")
        expect(row).to_contain_text("R16")
        assert page.evaluate("window.stillTheSamePage") is True
        fits(page, width)
        shot(page, "my-bookings-request", width)


@pytest.mark.parametrize("width", WIDTHS)
def test_this_and_the_following_shows_them_cancelled_here_and_in_an_open_day_view(
    e17, asgi_server, width
):
    from playwright.sync_api import expect

    start, end = slot(days=1, hour=10)
    series = series_reserve(
        user=e17,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule="FREQ=WEEKLY;COUNT=3",
        attendees=2,
        mode=SeriesMode.ALL,
        idempotency_key=str(uuid.uuid4()),
    )
    first, second, third = series.booked
    with browsing(asgi_server, e17, **device(width)) as context:
        day = context.new_page()
        day.goto(f"/day/?date={second.start_at:%Y-%m-%d}")
        htmx_ready(day)
        day.evaluate("window.stillTheSamePage = true")
        expect(day.locator(f'td.cell-mine[data-booking="{second.code}"]')).to_be_visible()

        page = context.new_page()
        page.goto(f"/series/{series.series.pk}/")
        htmx_ready(page)
        page.evaluate("window.stillTheSamePage = true")
        page.on("dialog", lambda dialog: dialog.accept())
        press(page.get_by_role("button", name=f"Cancel {second.code} and the following"), width)
        expect(page.locator("[data-cancelled]")).to_contain_text("Cancelled 2 meetings.")
        for booking, status in ((first, "confirmed"), (second, "cancelled"), (third, "cancelled")):
            row = page.locator(f'tr[data-booking="{booking.code}"]')
            expect(row).to_have_attribute("data-status", status)
        expect(page.locator(f'tr[data-booking="{second.code}"]')).to_contain_text("Cancelled")
        expect(page.get_by_text("This and the following")).to_have_count(1)
        assert page.evaluate("window.stillTheSamePage") is True
        fits(page, width)
        shot(page, "series-cancelled", width)

        expect(day.locator(f'td.cell-mine[data-booking="{second.code}"]')).to_have_count(0)
        assert day.evaluate("window.stillTheSamePage") is True
    assert set(Booking.objects.filter(series=series.series).values_list("code", "status")) == {
        (first.code, BookingStatus.CONFIRMED),
        (second.code, BookingStatus.CANCELLED),
        (third.code, BookingStatus.CANCELLED),
    }
