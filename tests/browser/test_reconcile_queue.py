from __future__ import annotations

import pytest

from accounts.models import AuditAction, AuditEntry
from agentops.models import Action
from agentops.runtime.runs import run_start
from bookings.models import Booking
from tests.accounts.factories import EMPLOYEES, PASSWORD, user_create
from tests.browser.conftest import ARTIFACTS
from tests.conftest import slot
from tests.workers import wait_for_run, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]


def test_an_operator_settles_an_unknown_outcome_from_the_queue(worker, e17, browser_page):
    """Every attempt of the write times out (injected), so the reconciler retries with the same
    key until its allowance is spent and hands the call to humans; the operator sees that the
    lookup proves nothing was written and retries once more with the same key."""
    from playwright.sync_api import expect

    user_create("o01", roles=[EMPLOYEES, "operators"])
    start, _ = slot(days=3, hour=15)
    run = run_start(
        user=e17,
        request_text=f"Book a room on {start:%Y-%m-%d} 15:00-16:00 for 3 people with a projector",
        faults=[{"tool": "reserve_room", "kind": "timeout", "calls": [1, 2, 3, 4]}],
    )
    action = wait_until(
        lambda: Action.objects.filter(run=run, status="needs_human").first(),
        message="the write to reach the operators' queue",
    )
    assert Booking.objects.count() == 0

    page = browser_page
    page.goto("/login/")
    page.get_by_label("Username", exact=True).fill("o01")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    nav = page.get_by_role("link", name="Reconciliation")
    expect(nav).to_contain_text("1")
    nav.click()

    card = page.locator(f'article[data-action="{action.pk}"]')
    expect(card).to_have_attribute("data-lookup", "absent")
    expect(card).to_contain_text(action.idempotency_key)
    expect(card).to_contain_text("reserve_room")
    expect(card.get_by_role("button", name="Accept the receipt")).to_have_count(0)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "reconciliation-queue-waiting.png"), full_page=True)
    page.evaluate("window.stillTheSamePage = true")
    card.get_by_role("button", name="Retry with the same key").click()
    expect(page.locator('[data-outcome="retry"]')).to_contain_text("Retrying with the same key")
    assert page.evaluate("window.stillTheSamePage") is True
    expect(page.locator("#operators-count")).to_be_hidden()  # the navigation's count follows
    expect(card).to_have_count(0)

    run = wait_for_run(run.pk)
    assert (run.status, run.outcome) == ("succeeded", "verified")
    booking = Booking.objects.get()
    assert booking.idempotency_key == action.idempotency_key
    assert AuditEntry.objects.get().action == AuditAction.RECONCILE_RETRIED
    page.reload()
    expect(page.locator("#unknown-outcomes")).to_contain_text("Nothing waits here.")
    page.screenshot(path=str(ARTIFACTS / "reconciliation-queue-retried.png"), full_page=True)
