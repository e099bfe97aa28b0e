"""The live screens after a restart of the web server, in real Chromium: what changed while it
was down was poked to nobody, so each screen re-reads when its socket comes back, without a
reload. (The run card resumes after its last event: test_assistant.py.)"""

from __future__ import annotations

import pytest
from django.db import connections
from django.test import Client

from agentops.runtime.runs import run_start
from bookings.services import booking_reserve
from config import devservers
from tests.browser.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, uvicorn_start, uvicorn_stop
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]


def signed_in(playwright, base_url: str, user):
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    context = browser.new_context(base_url=base_url, viewport={"width": 1200, "height": 900})
    context.set_default_timeout(20_000)
    # The server process hashes passwords its own way: sign in with a session instead.
    client = Client()
    client.force_login(user)
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base_url}]
    )
    return browser, context


def opened(context, path: str):
    """The page at ``path``, its sockets up (htmx loaded, a moment for the handshakes)."""
    page = context.new_page()
    page.goto(path)
    page.wait_for_function("() => window.htmx !== undefined")
    page.wait_for_timeout(500)
    page.evaluate("window.stillTheSamePage = true")
    return page


def test_the_inbox_and_its_count_catch_up_after_a_restart(worker, e17, approver, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import expect, sync_playwright

    start, _ = slot(days=6, hour=10)
    port = devservers.free_port()
    log = tmp_path / "uvicorn.log"
    server = uvicorn_start(port, log)
    with sync_playwright() as playwright:
        browser, context = signed_in(playwright, f"http://127.0.0.1:{port}", approver)
        try:
            page = opened(context, "/approvals/")
            expect(page.get_by_text("Nothing is waiting for a decision.")).to_be_visible()
            expect(page.locator("#approvals-count")).to_be_hidden()

            uvicorn_stop(server)  # the sockets drop; the page keeps trying to reconnect
            run = run_start(
                user=e17, request_text=f"book R16 on {start:%Y-%m-%d} 10:00-11:00 for 4 people"
            )
            wait_for_run(run.pk, statuses=("waiting_approval",))  # its poke reached nobody
            server = uvicorn_start(port, log)

            expect(page.locator("article.approval")).to_have_count(1, timeout=30_000)
            expect(page.locator("#approvals-count")).to_have_text("1")
            assert page.evaluate("window.stillTheSamePage") is True
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "inbox-after-restart.png"), full_page=True)
        finally:
            browser.close()
            # The test's database work inside sync_playwright ran on this context's own
            # connection: give it back to the pool, or it is lost to the tests after this.
            connections.close_all()
            uvicorn_stop(server)


def test_the_day_view_and_my_bookings_catch_up_after_a_restart(
    transactional_db, e17, e23, tmp_path
):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import expect, sync_playwright

    start, end = slot(days=1, hour=10)
    port = devservers.free_port()
    log = tmp_path / "uvicorn.log"
    server = uvicorn_start(port, log)
    with sync_playwright() as playwright:
        browser, context = signed_in(playwright, f"http://127.0.0.1:{port}", e17)
        try:
            day = opened(context, f"/day/?date={start.date().isoformat()}")
            busy = day.locator('tr[data-room="R9"] td.cell-busy')
            expect(busy).to_have_count(0)
            mine = opened(context, "/bookings/")
            expect(mine.locator("body")).to_have_attribute("data-bookings-live", "open")

            uvicorn_stop(server)
            expect(mine.locator("body")).to_have_attribute("data-bookings-live", "closed")
            booking_reserve(
                user=e23, room_code="R9", start_at=start, end_at=end, attendees=2,
                idempotency_key="while-down", title="Elsewhere",
            )  # fmt: skip
            own = booking_reserve(
                user=e17, room_code="R3", start_at=start, end_at=end, attendees=2,
                idempotency_key="mine-while-down", title="Planning",
            )  # fmt: skip
            server = uvicorn_start(port, log)

            expect(mine.get_by_text(own.booking.code)).to_be_visible(timeout=30_000)
            expect(busy).to_have_count(1, timeout=30_000)
            assert day.evaluate("window.stillTheSamePage") is True
            assert mine.evaluate("window.stillTheSamePage") is True
            ARTIFACTS.mkdir(exist_ok=True)
            day.screenshot(path=str(ARTIFACTS / "day-after-restart.png"), full_page=True)
        finally:
            browser.close()
            connections.close_all()
            uvicorn_stop(server)
