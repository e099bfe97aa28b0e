"""The day view in real Chromium against the real ASGI server (uvicorn, websockets and all), as
e17: book a free span by keyboard, see a booking made elsewhere appear without a reload, move a
booking; axe-core finds 0 violations on each new page; focus survives every htmx swap."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connections
from django.test import Client

from bookings.models import Booking
from bookings.services import booking_reserve
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, ROOT
from tests.conftest import slot

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]
SHOTS = ROOT / "var" / "artifacts"


def axe_clean(page) -> None:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()


def focus_kept(page) -> None:
    """Focus lands on an element once the swap has settled (htmx moves it at settle time, a
    moment after the new content is visible), never left on <body>; fails after 5 s."""
    focused = "document.activeElement !== null && document.activeElement !== document.body"
    for _ in range(50):  # page.evaluate, not wait_for_function: the page's CSP forbids eval
        if page.evaluate(focused):
            return
        page.wait_for_timeout(100)
    raise AssertionError("focus was left on <body> after the swap")


def shots(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(Path(SHOTS) / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_book_from_the_day_view_see_others_live_and_move(e17, e23, asgi_server):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import expect, sync_playwright

    start, end = slot(days=1, hour=10)
    day = start.date().isoformat()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(base_url=asgi_server, viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)
        try:
            client = Client()
            client.force_login(e17)
            page.context.add_cookies(
                [
                    {
                        "name": "sessionid",
                        "value": client.cookies["sessionid"].value,
                        "url": asgi_server,
                    }
                ]
            )
            page.goto(f"/day/?date={day}")
            expect(page.locator('tr[data-room="R7"]')).to_be_visible()
            page.wait_for_function("() => window.htmx !== undefined")
            axe_clean(page)
            page.evaluate("window.stillTheSamePage = true")

            # Keyboard: focus the 10:00 cell of R7 and press Enter.
            cell = page.locator(f"#cell-R7-{start:%Y%m%d}-1000")
            cell.focus()
            page.keyboard.press("Enter")
            expect(page.locator("#panel form.book-slot")).to_be_visible()
            focus_kept(page)
            page.locator('#panel input[name="title"]').fill("Design <review>")
            page.locator('#panel button[type="submit"]').click()
            expect(page.locator("#outcome [data-booking]")).to_be_visible()
            focus_kept(page)
            booking = Booking.objects.get(requester=e17)
            assert booking.title == "Design <review>" and booking.room.code == "R7"
            expect(page.locator(f'td.cell-mine[data-booking="{booking.code}"]')).to_contain_text(
                "Design <review>"
            )
            shots(page, "day-view-booked")

            # A booking made elsewhere appears without a reload, as busy, without its title.
            busy = page.locator('tr[data-room="R9"] td.cell-busy')
            expect(busy).to_have_count(0)
            booking_reserve(
                user=e23,
                room_code="R9",
                start_at=start,
                end_at=end,
                attendees=2,
                idempotency_key="elsewhere",
                title="Secret",
            )
            expect(busy).to_have_count(1)
            assert page.evaluate("window.stillTheSamePage") is True
            assert "Secret" not in page.content()

            # Move it: My bookings -> Change -> R9 is taken at 10:00, so 15:00 in R3.
            page.goto("/bookings/")
            page.get_by_role("link", name=f"Change {booking.code}").click()
            expect(page.locator("#change-form")).to_be_visible()
            axe_clean(page)
            page.locator("#change-room").select_option("R3")
            page.locator('input[name="start"]').fill("15:00")
            page.locator('input[name="end"]').fill("16:00")
            page.get_by_role("button", name="Save the change").click()
            expect(page.locator(f'[data-changed="{booking.code}"]')).to_be_visible()
            focus_kept(page)
            shots(page, "change-booking")
            moved = Booking.objects.get(pk=booking.pk)
            assert (moved.code, moved.room.code) == (booking.code, "R3")

            page.goto("/day/room/R3/?date=" + day)
            expect(page.locator(f'td.cell-mine[data-booking="{booking.code}"]')).to_be_visible()
            axe_clean(page)
            shots(page, "room-week")
        finally:
            browser.close()
            # The test's database work inside sync_playwright ran on this context's own
            # connection: give it back to the pool, or it is lost to the tests after this.
            connections.close_all()
