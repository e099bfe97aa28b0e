"""The live screens never stay behind, in real Chromium: after a restart of the web server (what
changed while it was down was poked to nobody, so each screen re-reads when its socket comes
back), and when a poke comes while the read of the one before is still under way. (The run card
resumes after its last event: test_assistant.py.)"""

from __future__ import annotations

import pytest

from agentops.runtime.direct import tool_call_governed
from agentops.runtime.runs import run_start
from bookings.services import booking_reserve
from tests.browser.conftest import ARTIFACTS, browsing
from tests.conftest import reserve_room_arguments, slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]


def opened(context, path: str):
    """The page at ``path``, its sockets up (htmx loaded, a moment for the handshakes)."""
    page = context.new_page()
    page.goto(path)
    page.wait_for_function("() => window.htmx !== undefined")
    page.wait_for_timeout(500)
    page.evaluate("window.stillTheSamePage = true")
    return page


def test_the_inbox_and_its_count_catch_up_after_a_restart(
    worker, e17, approver, restartable_server
):
    from playwright.sync_api import expect

    start, _ = slot(days=6, hour=10)
    server = restartable_server
    with browsing(server.url, approver) as context:
        page = opened(context, "/approvals/")
        expect(page.get_by_text("Nothing is waiting for a decision.")).to_be_visible()
        expect(page.locator("#approvals-count")).to_be_hidden()

        server.stop()  # the sockets drop; the page keeps trying to reconnect
        run = run_start(
            user=e17, request_text=f"book R16 on {start:%Y-%m-%d} 10:00-11:00 for 4 people"
        )
        wait_for_run(run.pk, statuses=("waiting_approval",))  # its poke reached nobody
        server.start()

        expect(page.locator("article.approval")).to_have_count(1, timeout=30_000)
        expect(page.locator("#approvals-count")).to_have_text("1")
        assert page.evaluate("window.stillTheSamePage") is True
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "inbox-after-restart.png"), full_page=True)


def test_the_day_view_and_my_bookings_catch_up_after_a_restart(e17, e23, restartable_server):
    from playwright.sync_api import expect

    start, end = slot(days=1, hour=10)
    server = restartable_server
    with browsing(server.url, e17) as context:
        day = opened(context, f"/day/?date={start.date().isoformat()}")
        busy = day.locator('tr[data-room="R9"] td.cell-busy')
        expect(busy).to_have_count(0)
        mine = opened(context, "/bookings/")
        expect(mine.locator("body")).to_have_attribute("data-bookings-live", "open")

        server.stop()
        expect(mine.locator("body")).to_have_attribute("data-bookings-live", "closed")
        booking_reserve(
            user=e23, room_code="R9", start_at=start, end_at=end, attendees=2,
            idempotency_key="while-down", title="Elsewhere",
        )  # fmt: skip
        own = booking_reserve(
            user=e17, room_code="R3", start_at=start, end_at=end, attendees=2,
            idempotency_key="mine-while-down", title="Planning",
        )  # fmt: skip
        server.start()

        expect(mine.get_by_text(own.booking.code)).to_be_visible(timeout=30_000)
        expect(busy).to_have_count(1, timeout=30_000)
        assert day.evaluate("window.stillTheSamePage") is True
        assert mine.evaluate("window.stillTheSamePage") is True
        ARTIFACTS.mkdir(exist_ok=True)
        day.screenshot(path=str(ARTIFACTS / "day-after-restart.png"), full_page=True)


def booked(user, room: str, start, end) -> str:
    """A booking through the governed runtime (as over the API or MCP); its code."""
    arguments = reserve_room_arguments(room, start, end, attendees=2)
    envelope = tool_call_governed(user=user, name="reserve_room", arguments=arguments)
    assert envelope["ok"], envelope
    return envelope["data"]["booking_id"]


def test_a_poke_during_a_read_is_read_after_it(e17, restartable_server):
    """My bookings re-reads on each poke. A poke that comes while the read of the one before is
    still under way is read once that one is in: the page ends with both bookings."""
    from playwright.sync_api import expect

    start, end = slot(days=2, hour=10)
    with browsing(restartable_server.url, e17) as context:
        mine = opened(context, "/bookings/")
        expect(mine.locator("body")).to_have_attribute("data-bookings-live", "open")
        held = []

        def hold(route):  # the first re-read is answered now, delivered when the test says
            if route.request.headers.get("hx-request") and not held:
                held.append((route, route.fetch()))
            else:
                route.continue_()

        mine.route("**/bookings/", hold)
        first = booked(e17, "R3", start, end)  # a run's end pokes My bookings
        for _ in range(100):
            if held:
                break
            mine.wait_for_timeout(100)
        assert held, "the first poke's read never started"
        second = booked(e17, "R7", start, end)
        mine.wait_for_timeout(1500)  # its poke arrives while the first read is held
        route, answer = held[0]
        route.fulfill(response=answer)  # the first read: without the second booking

        expect(mine.get_by_text(first)).to_be_visible()
        expect(mine.get_by_text(second)).to_be_visible(timeout=10_000)
        assert mine.evaluate("window.stillTheSamePage") is True
