"""Under the pages' Content-Security-Policy (nonces, no inline handlers, no eval), htmx and the
websockets still work in real Chromium: the assistant's run card fills live over its socket,
the day view swaps its grid, the approvals inbox runs its nonced socket script; and Chromium
reports no policy violation on any of them."""

from __future__ import annotations

import pytest
from django.db import connections

from agentops.models import AgentRun
from agentops.runtime.redis_client import get_redis
from tests.browser.conftest import CHROMIUM, signed_in
from tests.browser.test_assistant import CHINESE, REQUEST
from tests.workers import wait_for_run

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]

VIOLATION_WORDS = ("Content Security Policy", "Refused to", "unsafe-eval", "unsafe-inline")


def test_htmx_and_the_sockets_work_under_the_policy(request, e17, approver, asgi_server):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import expect, sync_playwright

    get_redis().flushdb()
    complaints: list[str] = []
    with sync_playwright() as playwright:
        browser, context = signed_in(playwright, asgi_server, e17, **CHINESE)
        page = context.new_page()
        browsers = [browser]
        page.on(
            "console",
            lambda m: complaints.append(m.text) if m.type in ("error", "warning") else None,
        )
        page.on("pageerror", lambda e: complaints.append(str(e)))
        try:
            page.goto("/assistant/")
            page.get_by_label("需要什么？").fill(REQUEST)
            page.get_by_role("button", name="发送").click()
            card = page.locator("#run-card")
            expect(card.locator("[data-kind=run_started]")).to_be_visible()
            page.wait_for_timeout(500)  # the card's websocket connects
            request.getfixturevalue("celery_worker_thread")
            run = wait_for_run(AgentRun.objects.get().pk)
            expect(card.locator("[data-reply]")).to_contain_text(run.reply[:10])  # live

            page.goto("/day/")
            page.locator("select[name=floor]").select_option(index=1)  # an htmx swap
            expect(page.locator("#grid")).to_be_visible()

            browser, context = signed_in(playwright, asgi_server, approver, **CHINESE)
            browsers.append(browser)
            inbox = context.new_page()
            inbox.on("console", lambda m: complaints.append(m.text) if m.type == "error" else None)
            inbox.goto("/approvals/")
            inbox.wait_for_function("() => window.htmx !== undefined")
            inbox.wait_for_timeout(500)  # its nonced script opens the inbox socket
        finally:
            for browser in browsers:
                browser.close()
            connections.close_all()

    violations = [c for c in complaints if any(w in c for w in VIOLATION_WORDS)]
    assert violations == []
