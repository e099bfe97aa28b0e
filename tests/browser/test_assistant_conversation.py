"""A conversation on the assistant page in real Chromium against the real ASGI server and a
real Celery worker: e17 asks for a room without saying how many people, the assistant asks,
e17 answers "4" in the same page's box, and a booking for 4 is made; the thread shows both
turns and the reply comes over the run card's socket, without a reload. Screenshots at 1280
and 390 px wide under var/artifacts/."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from agentops.models import AgentRun
from agentops.runtime.redis_client import get_redis
from bookings.models import Booking
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, ROOT
from tests.workers import wait_for_run

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]

ARTIFACTS = ROOT / "var" / "artifacts"
FIRST = "book a room tomorrow at 3pm for an hour"


def english_page(playwright, base_url: str, user, width: int):
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    context = browser.new_context(
        base_url=base_url, locale="en-GB", viewport={"width": width, "height": 900}
    )
    context.set_default_timeout(20_000)
    client = Client()
    client.force_login(user)
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base_url}]
    )
    return browser, context.new_page()


@pytest.mark.parametrize("width", [1280, 390])
def test_a_follow_up_in_the_same_box_answers_the_question_and_books_for_four(
    worker, e17, asgi_server, width
):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import expect, sync_playwright

    get_redis().flushdb()
    with sync_playwright() as playwright:
        browser, page = english_page(playwright, asgi_server, e17, width)
        try:
            page.goto("/assistant/")
            page.get_by_label("What do you need?").fill(FIRST)
            page.get_by_role("button", name="Ask").click()
            card = page.locator("#run-card")
            expect(card.locator("[data-reply]")).to_have_text(
                "Could you tell me for how many people?"
            )
            first = AgentRun.objects.get()
            assert Booking.objects.count() == 0
            assert first.delegation["max_writes"] == 0

            page.evaluate("window.stillTheSamePage = true")  # gone once the form navigates
            page.get_by_label("Reply or ask something else").fill("4")
            page.get_by_role("button", name="Ask").click()
            page.wait_for_url(lambda url: str(first.pk) not in url)
            page.evaluate("window.sameRunPage = true")  # the reply must come without a reload
            second = wait_for_run(AgentRun.objects.exclude(pk=first.pk).get().pk)
            assert second.status == "succeeded", second.reply
            assert second.conversation_id == first.conversation_id

            booking = Booking.objects.get(requester=e17)
            tomorrow = timezone.localdate() + timedelta(days=1)
            start = timezone.localtime(booking.during.lower)
            assert booking.attendees == 4
            assert (start.date(), start.hour, booking.during.upper - booking.during.lower) == (
                tomorrow,
                15,
                timedelta(hours=1),
            )
            expect(card.locator("[data-reply]")).to_contain_text(booking.code)
            expect(card.locator("[data-reply]")).to_contain_text("for 4")
            thread = page.locator("section.conversation article.turn")
            expect(thread).to_have_count(1)  # the earlier turn, above this run's card
            expect(thread.locator(".turn-request")).to_contain_text(FIRST)
            expect(thread.locator(".turn-reply")).to_contain_text("how many people?")
            expect(card).to_contain_text("4")
            assert page.evaluate("window.sameRunPage") is True
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(
                path=str(ARTIFACTS / f"assistant-conversation-{width}.png"), full_page=True
            )
        finally:
            browser.close()
