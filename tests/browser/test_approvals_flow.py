from __future__ import annotations

import pytest

from agentops.runtime.runs import run_start
from bookings.models import Booking
from tests.accounts.factories import PASSWORD
from tests.browser.conftest import ARTIFACTS
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]


def test_an_approver_approves_a_premium_room_in_the_inbox(worker, e17, approver, browser_page):
    from playwright.sync_api import expect

    start, _ = slot(days=4, hour=10)
    run = run_start(user=e17, request_text=f"book R16 on {start:%Y-%m-%d} 10:00-11:00 for 4 people")
    assert (
        wait_for_run(run.pk, statuses=("waiting_approval", "failed")).status == "waiting_approval"
    )

    page = browser_page
    page.goto("/login/")
    page.get_by_label("Username", exact=True).fill("a01")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    nav = page.get_by_role("link", name="Approvals")
    expect(nav).to_contain_text("1")
    nav.click()

    card = page.locator("article.approval")
    expect(card).to_have_count(1)
    expect(card).to_contain_text("R16 is a premium room that needs approval")
    expect(card).to_contain_text("E17")
    page.evaluate("window.stillTheSamePage = true")
    card.get_by_label("Reason").fill("Board meeting")
    card.get_by_role("button", name="Approve").click()
    expect(page.locator("tr[data-status=approved]")).to_contain_text("Board meeting")
    assert page.evaluate("window.stillTheSamePage") is True
    expect(page.locator("#approvals-count")).to_be_hidden()  # the navigation's count follows
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "approvals-inbox-approved.png"), full_page=True)

    assert wait_for_run(run.pk).status == "succeeded"
    assert Booking.objects.get().room.code == "R16"


def test_a_premium_room_booked_on_the_screen_is_rejected_and_the_employee_sees_why(
    worker, e17, approver, browser_page
):
    from playwright.sync_api import expect

    from approvals.models import ApprovalRequest
    from approvals.services import approval_decide
    from tests.workers import wait_until

    day = slot(days=5)[0].date()
    page = browser_page
    page.goto("/login/")
    page.get_by_label("Username", exact=True).fill("e17")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_label("Date", exact=True).fill(day.isoformat())
    page.get_by_label("From", exact=True).fill("09:00")
    page.get_by_label("To", exact=True).fill("10:00")
    page.get_by_label("People", exact=True).fill("12")
    page.get_by_role("button", name="Search").click()
    r16 = page.locator('[data-room="R16"]')
    r16.get_by_role("button", name="Book").click()
    expect(r16.locator("[data-pending]")).to_contain_text("needs an approver")
    assert Booking.objects.count() == 0

    request = ApprovalRequest.objects.get()
    assert approval_decide(
        request_id=request.pk, approver=approver, approve=False, reason="Reserved for the board"
    ).ok
    wait_until(lambda: ApprovalRequest.objects.get().status == "rejected", message="the rejection")
    page.get_by_role("link", name="My bookings").click()
    row = page.locator(f'tr[data-request="{request.pk}"]')
    expect(row).to_have_attribute("data-status", "rejected")
    expect(row).to_contain_text("Reserved for the board")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "my-bookings-rejected-request.png"), full_page=True)
    assert Booking.objects.count() == 0
