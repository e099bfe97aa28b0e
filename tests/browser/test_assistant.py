"""The assistant page in real Chromium against the real ASGI server: e17, with the interface in
Chinese, sends a request and watches the run card fill to the final reply over the run's
websocket without a reload; a double click on the submit button makes one run."""

from __future__ import annotations

import pytest

from agentops.models import AgentRun
from agentops.runtime.redis_client import get_redis
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from bookings.models import Booking
from tests.browser.conftest import ARTIFACTS, browsing
from tests.conftest import slot
from tests.workers import _wait_until_idle, wait_for_run, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]

REQUEST = "帮我订明天下午两点到三点的会议室，3 个人，要有投影"


CHINESE = {"locale": "zh-CN", "viewport": {"width": 1200, "height": 1000}}


def test_e17_in_chinese_watches_the_card_fill_to_the_reply_without_a_reload(
    request, e17, asgi_server
):
    from playwright.sync_api import expect

    get_redis().flushdb()  # rate limits and queued tasks of earlier tests
    with browsing(asgi_server, e17, **CHINESE) as context:
        page = context.new_page()
        page.goto("/assistant/")
        expect(page.get_by_role("heading", name="助手", exact=True)).to_be_visible()
        page.get_by_label("需要什么？").fill(REQUEST)
        page.get_by_role("button", name="发送").click()
        card = page.locator("#run-card")
        # No worker runs yet: the card shows what was understood and waits on its socket.
        expect(card.locator("[data-kind=run_started]")).to_contain_text("3 人")
        page.wait_for_function("() => window.htmx !== undefined")
        page.evaluate("window.stillTheSamePage = true")
        page.wait_for_timeout(500)  # let the card's websocket connect

        request.getfixturevalue("celery_worker_thread")  # now the run goes on
        run = wait_for_run(AgentRun.objects.get().pk)
        assert run.status == "succeeded", run.reply
        booking = Booking.objects.get(requester=e17)
        expect(card.locator(f"[data-booking={booking.code}]").first).to_be_visible()
        expect(card.locator("[data-reply]")).to_contain_text(booking.code)
        expect(card.locator("[data-kind=gate]").first).to_contain_text("允许")
        expect(card.locator("#run-status")).to_have_text("完成")
        past = page.locator(f"#past-{run.pk}-status")
        expect(past.locator("[data-status]")).to_have_text("完成")
        # The list of past requests shows the reply too, without a reload.
        expect(past.locator("[data-past-reply]")).to_contain_text(booking.code)
        assert page.evaluate("window.stillTheSamePage") is True
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "assistant-zh-run-finished.png"), full_page=True)
    _wait_until_idle()


def test_a_double_click_on_submit_makes_one_run(e17, asgi_server):
    from playwright.sync_api import expect

    get_redis().flushdb()
    with browsing(asgi_server, e17, **CHINESE) as context:
        page = context.new_page()
        page.goto("/assistant/")
        page.get_by_label("需要什么？").fill(REQUEST)
        page.get_by_role("button", name="发送").dblclick()
        expect(page.locator("#run-card")).to_be_visible()
        run = AgentRun.objects.get()  # exactly one
        assert page.url.endswith(f"/assistant/runs/{run.pk}/")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "assistant-double-submit.png"), full_page=True)
    assert AgentRun.objects.count() == 1
    get_redis().flushdb()  # its first step was never picked up: nothing left for later tests


def test_a_card_that_lost_its_socket_resumes_after_its_last_event(
    worker, e17, approver, restartable_server
):
    """The card fills live up to "waiting for an approver"; the web server goes away, the
    approver approves and the run finishes while nobody listens; when the server is back, the
    page reconnects after the last event it shows and gets each missed event once, in order (a
    reconnect from the first URL's `after` would repeat the events that came live)."""
    from playwright.sync_api import expect

    start, _ = slot(days=3, hour=10)
    server = restartable_server
    with browsing(server.url, e17, **CHINESE) as context:
        page = context.new_page()
        page.goto("/assistant/")
        page.get_by_label("需要什么？").fill(
            f"book R16 on {start:%Y-%m-%d} 10:00-11:00 for 4 people"
        )
        page.get_by_role("button", name="发送").click()
        page.evaluate("window.stillTheSamePage = true")
        # The worker's part first, then the page's: a failure says which was late.
        run_id = wait_until(
            lambda: AgentRun.objects.values_list("pk", flat=True).first(), message="the run"
        )
        wait_for_run(run_id, statuses=("waiting_approval",))
        expect(page.locator("#run-status")).to_have_text(
            "等待审批人", timeout=20_000
        )  # came live, or with the page when the run got there first
        live = int(page.locator("#run-seq").get_attribute("data-last-seq"))
        assert live > 1

        server.stop()  # the socket drops; the extension keeps trying to reconnect
        pending = ApprovalRequest.objects.get(status="pending")
        decided = approval_decide(
            request_id=pending.pk, approver=approver, approve=True, reason="ok"
        )
        assert decided.ok
        run = wait_for_run(AgentRun.objects.get().pk)
        assert run.status == "succeeded", run.reply
        server.start()

        expect(page.locator("#run-card [data-reply]")).to_be_visible(timeout=60_000)
        shown = page.locator("#run-events > li").evaluate_all(
            "items => items.map(i => Number(i.dataset.seq))"
        )
        assert shown == list(range(1, run.events.count() + 1))  # each once, in order
        assert page.evaluate("window.stillTheSamePage") is True
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "assistant-reconnected.png"), full_page=True)
