"""The inbox in real Chromium against the real ASGI server (uvicorn, websockets and all): a
request made while the approver looks at the inbox appears without a reload."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test import Client

from agentops.runtime.runs import run_start
from bookings.models import Booking
from tests.browser.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]


def test_a_new_request_appears_in_the_open_inbox_without_a_reload(
    worker, e17, approver, asgi_server
):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import expect, sync_playwright

    start, _ = slot(days=6, hour=10)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(base_url=asgi_server, viewport={"width": 1200, "height": 900})
        page.set_default_timeout(15_000)
        try:
            # The server process hashes passwords its own way: sign in with a session instead.
            client = Client()
            client.force_login(approver)
            session = client.cookies["sessionid"].value
            page.context.add_cookies([{"name": "sessionid", "value": session, "url": asgi_server}])
            page.goto("/approvals/")
            expect(page.get_by_text("Nothing is waiting for a decision.")).to_be_visible()
            page.wait_for_function("() => window.htmx !== undefined")
            page.wait_for_timeout(500)  # let the inbox's websocket connect
            page.evaluate("window.stillTheSamePage = true")

            run = run_start(
                user=e17, request_text=f"book R16 on {start:%Y-%m-%d} 10:00-11:00 for 4 people"
            )
            card = page.locator("article.approval")
            expect(card).to_have_count(1)  # pushed, not reloaded
            expect(page.locator("#approvals-count")).to_have_text("1")
            assert page.evaluate("window.stillTheSamePage") is True
            card.get_by_label("Reason").fill("Customer visit")
            card.get_by_role("button", name="Approve").click()
            expect(page.locator("tr[data-status=approved]")).to_contain_text("Customer visit")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "live-inbox-approved.png"), full_page=True)
        finally:
            browser.close()
            # The test's database work inside sync_playwright ran on this context's own
            # connection: give it back to the pool, or it is lost to the tests after this.
            connections.close_all()
    assert wait_for_run(run.pk).status == "succeeded"
    assert Booking.objects.get().room.code == "R16"
