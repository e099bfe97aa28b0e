"""Recurring meetings, check-in and release, and decisions seen live, in real Chromium as e17
against the real ASGI server (websockets and all). Screenshots at 1280 and 390 px land in
var/artifacts/; axe-core finds no violation on any of the new pages' states."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, connections
from django.test import Client
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from bookings.checkin import bookings_release_no_shows
from bookings.models import Booking, BookingSeries, BookingStatus
from tests.bookings.factories import booking_create
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, ROOT
from tests.conftest import slot
from tests.workers import wait_for_run, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]

SHOTS = ROOT / "var" / "artifacts"
WIDTHS = (1280, 390)


@pytest.fixture
def chromium() -> Iterator:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            # Inside sync_playwright the test runs in another context, hence on another
            # database connection (as tests/browser/conftest.py says): give it back.
            connections.close_all()


def signed_in(browser, server: str, user):
    """A page of ``user``'s session (the server hashes passwords its own way)."""
    client = Client()
    client.force_login(user)
    page = browser.new_page(base_url=server, viewport={"width": 1280, "height": 900})
    page.set_default_timeout(15_000)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": server}]
    )
    return page


def no_axe_violations(page, state: str) -> None:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    assert results.violations_count == 0, f"{state}:\n{results.generate_report()}"


def shots(page, name: str) -> list[Path]:
    """The page at each width (full page), then back to 1280."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    taken = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        path = SHOTS / f"{name}-{width}.png"
        page.screenshot(path=str(path), full_page=True)
        taken.append(path)
    page.set_viewport_size({"width": 1280, "height": 900})
    return taken


def off_the_loop(fn, **kwargs):
    """Call ``fn`` on another thread (with its own database connection) and return its result."""

    def call():
        try:
            return fn(**kwargs)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result(timeout=30)


def test_a_series_with_a_conflict_is_previewed_and_only_the_free_ones_booked(
    transactional_db, e17, e23, asgi_server, chromium
):
    start, end = slot(days=1, hour=14)
    taken = booking_create(
        requester=e23, room="R7", start_at=start + timedelta(7), end_at=end + timedelta(7)
    )
    page = signed_in(chromium, asgi_server, e17)
    page.goto("/bookings/")
    page.get_by_role("link", name="Book a recurring meeting").click()
    no_axe_violations(page, "series form")
    page.get_by_label("Room").select_option("R7")
    page.get_by_label("First date").fill(f"{start:%Y-%m-%d}")
    page.get_by_label("From", exact=True).fill("14:00")
    page.get_by_label("To", exact=True).fill("15:00")
    page.get_by_label("People", exact=True).fill("3")
    page.get_by_label("Repeats").select_option("weekly")
    page.get_by_label("Number of meetings", exact=True).fill("3")
    page.get_by_role("button", name="Preview").click()
    rows = page.locator("tr[data-occurrence]")
    from playwright.sync_api import expect

    expect(rows).to_have_count(3)
    expect(page.locator("tr[data-free=no]")).to_have_count(1)
    expect(page.locator("tr[data-free=no]")).to_contain_text("taken")
    expect(page.get_by_text(e23.username)).to_have_count(0)
    no_axe_violations(page, "series preview with a taken time")
    shots(page, "series-preview")
    assert not BookingSeries.objects.exists()

    page.get_by_role("button", name="Book only the 2 free ones").click()
    expect(page.locator("[data-series]")).to_contain_text("Booked 2 meetings in R7.")
    expect(page.locator("[data-series]")).to_contain_text("1 taken time was skipped.")
    no_axe_violations(page, "series booked")
    series = BookingSeries.objects.get()
    booked = list(series.bookings.order_by("during"))
    assert [b.start_at for b in booked] == [start, start + timedelta(14)]
    assert Booking.objects.get(pk=taken.pk).requester == e23

    page.get_by_role("link", name="See the series").click()
    expect(page.locator("tr[data-booking]")).to_have_count(2)
    no_axe_violations(page, "series detail")
    shots(page, "series-detail")
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Cancel {booked[1].code} and the following").click()
    expect(page.locator("[data-cancelled]")).to_contain_text("Cancelled 1 meeting.")
    assert Booking.objects.get(pk=booked[1].pk).status == BookingStatus.CANCELLED
    assert Booking.objects.get(pk=booked[0].pk).status == BookingStatus.CONFIRMED


def test_check_in_then_a_no_show_released_live_with_an_injected_clock(
    transactional_db, e17, asgi_server, chromium
):
    from playwright.sync_api import expect

    now = timezone.now()
    soon = booking_create(
        requester=e17,
        room="R7",
        start_at=now + timedelta(minutes=5),
        end_at=now + timedelta(hours=1),
    )
    missed = booking_create(
        requester=e17,
        room="R9",
        start_at=now + timedelta(minutes=8),
        end_at=now + timedelta(hours=1),
    )
    page = signed_in(chromium, asgi_server, e17)
    page.goto("/bookings/")
    expect(page.locator("#calendar-feed")).to_contain_text("Create my calendar link")
    page.wait_for_function("() => document.body.dataset.bookingsLive === 'open'")
    no_axe_violations(page, "my bookings with check-in")
    page.get_by_role("button", name=f"Check in to {soon.code}").click()
    expect(page.locator(f"#checkin-{soon.code}")).to_contain_text("Checked in")
    assert Booking.objects.get(pk=soon.pk).checked_in_at is not None

    page.get_by_role("button", name="Create my calendar link").click()
    expect(page.locator("#feed-url")).to_have_value(
        __import__("re").compile(r"/calendar/feed/[\w-]+\.ics$")
    )
    no_axe_violations(page, "my bookings with the calendar link")
    shots(page, "my-bookings-checkin")

    page.evaluate("window.stillTheSamePage = true")
    # The clock the sweeper is given: past both grace periods. On a thread of its own, as the
    # beat task runs (Playwright's loop owns this one, and the push needs a loop of its own).
    released = off_the_loop(bookings_release_no_shows, now=missed.start_at + timedelta(minutes=16))
    assert released.codes == [missed.code]
    row = page.locator(f"tr[data-booking={missed.code}]")
    expect(row).to_have_attribute("data-status", "cancelled")  # pushed, not reloaded
    expect(row).to_contain_text("Released")
    expect(page.locator(f"tr[data-booking={soon.code}]")).to_have_attribute(
        "data-status", "confirmed"
    )
    assert page.evaluate("window.stillTheSamePage") is True
    no_axe_violations(page, "my bookings after a release")
    shots(page, "my-bookings-released")


def test_an_approvers_decision_is_seen_live_without_a_reload(
    worker, e17, approver, asgi_server, chromium
):
    from playwright.sync_api import expect

    page = signed_in(chromium, asgi_server, e17)
    start, _ = slot(days=3, hour=10)
    page.goto("/series/new/")
    page.get_by_label("Room").select_option("R16")
    page.get_by_label("First date").fill(f"{start:%Y-%m-%d}")
    page.get_by_label("From", exact=True).fill("10:00")
    page.get_by_label("To", exact=True).fill("11:00")
    page.get_by_label("People", exact=True).fill("4")
    page.get_by_label("Number of meetings", exact=True).fill("2")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("[data-needs-approval]")).to_be_visible()
    no_axe_violations(page, "series preview that needs approval")
    page.get_by_role("button", name="Book all 2 meetings").click()
    expect(page.locator("[data-pending]")).to_contain_text("needs an approver's OK")

    page.goto("/bookings/")
    request = ApprovalRequest.objects.get()
    pending = page.locator(f"tr[data-request='{request.pk}']")
    expect(pending).to_have_attribute("data-status", "pending")
    expect(pending).to_contain_text("An approver decides by")
    page.wait_for_function("() => document.body.dataset.bookingsLive === 'open'")
    page.evaluate("window.stillTheSamePage = true")
    assert off_the_loop(
        approval_decide,
        request_id=request.pk,
        approver=approver,
        approve=True,
        reason="Board review",
    ).ok
    expect(pending).to_have_attribute("data-status", "approved")
    expect(pending).to_contain_text("Board review")
    assert wait_for_run(request.run_ref).status == "succeeded"
    expect(page.locator("tr[data-booking]")).to_have_count(2)  # the run's end pushed again
    assert page.evaluate("window.stillTheSamePage") is True
    wait_until(lambda: BookingSeries.objects.exists(), message="the series")
    no_axe_violations(page, "my bookings after the decision")
    shots(page, "my-bookings-approved")
