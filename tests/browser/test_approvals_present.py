"""In Chromium, as a01, e17, o01 and admin: the approval-after-conflict path end to end (a warning
before, the refusal or the honest outcome after, on both sides), a Chinese approver reading the
reasons in Chinese, the queue and the audit log explaining themselves; screenshots at 1280 and
390 px under var/artifacts/."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentops import tasks
from agentops.models import Action
from agentops.services import tool_call_governed
from approvals.models import ApprovalRecord, ApprovalRequest
from bookings.models import Booking
from bookings.services import booking_reserve
from config.celery import app
from tests.accounts.factories import EMPLOYEES, PASSWORD, user_create
from tests.conftest import reserve_room_arguments, slot

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]

SHOTS = Path(__file__).resolve().parents[2] / "var" / "artifacts"


@pytest.fixture(autouse=True)
def _no_leftover_tasks():
    """The decisions' continuations these tests run inline stay in the broker: drop them."""
    yield
    app.control.purge()


def shoot(page, name: str) -> None:
    """The page at 1280 and at 390 px wide."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def log_in(page, username: str) -> None:
    page.context.clear_cookies()
    page.goto("/login/")
    page.get_by_label("Username", exact=True).fill(username)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def ask(user, room: str, start, end) -> ApprovalRequest:
    envelope = tool_call_governed(
        user=user,
        name="reserve_room",
        arguments=reserve_room_arguments(room, start, end, attendees=3),
        channel="web",
    )
    assert envelope["code"] == "approval_pending", envelope
    return ApprovalRequest.objects.filter(status="pending").order_by("-created_at").first()


def take(user, room: str, start, end, key: str) -> None:
    booking_reserve(
        user=user, room_code=room, start_at=start, end_at=end, attendees=2, idempotency_key=key
    )


def run_the_decision(request: ApprovalRequest) -> None:
    """What the worker does after a decision, inline (no worker: the test chooses the moment)."""
    tasks.approval_settled_task(request.action_ref)
    action = Action.objects.get(pk=request.action_ref)
    if action.status == "queued":
        tasks.execute_action_task(str(action.pk), str(action.run_id))


def test_approval_after_a_conflict_warns_refuses_and_tells_both_sides(
    e17, e23, approver, browser_page
):
    from playwright.sync_api import expect

    page = browser_page
    start, end = slot(days=3, hour=10)
    half_end = slot(days=3, hour=10, minute=30)[0]

    # 1. Warning before: R12 was taken after e17 asked; the card says so, Approve is off.
    warned = ask(e17, "R12", start, end)
    take(e23, "R12", start, half_end, "e23-r12")
    log_in(page, "a01")
    page.get_by_role("link", name="Approvals").click()
    card = page.locator(f"#request-{warned.pk}")
    expect(card.locator("h3")).to_contain_text("(R12)")
    expect(card.locator("h3")).to_contain_text("10:00–11:00")
    expect(card).to_contain_text("Asked by e17 (E17)")
    expect(card).to_contain_text("on the booking screen")
    expect(card).to_contain_text("R12 belongs to Sales, not Engineering")
    expect(card.locator(".present")).to_contain_text("R12 was taken meanwhile")
    expect(card.get_by_role("button", name="Approve")).to_be_disabled()
    expect(card).not_to_contain_text("reserve_room")
    expect(card).not_to_contain_text("Schedule version seen")
    shoot(page, "approvals-warning")

    # 2. Refusal after: the card was fine when loaded, the slot went before the click.
    pm_start, pm_end = slot(days=3, hour=14)
    refused = ask(e17, "R12", pm_start, pm_end)
    page.reload()
    card = page.locator(f"#request-{refused.pk}")
    expect(card.locator(".present")).to_contain_text("it can still be done as requested")
    take(e23, "R12", pm_start, pm_end, "e23-r12-afternoon")
    card.get_by_label("Reason").fill("Fine by me")
    card.get_by_role("button", name="Approve").click()
    card = page.locator(f"#request-{refused.pk}")
    expect(card.locator(".alert-error")).to_contain_text("It cannot be approved")
    expect(card.locator(".alert-error")).to_contain_text("R12 was taken meanwhile")
    assert not ApprovalRecord.objects.filter(request=refused).exists()
    assert ApprovalRequest.objects.get(pk=refused.pk).status == "pending"
    assert not Booking.objects.filter(requester=e17).exists()
    card.get_by_label("Reason").fill("R12 is taken; pick another room")
    card.get_by_role("button", name="Reject").click()
    expect(page.locator(f"tr[data-request='{refused.pk}']")).to_contain_text("Rejected")

    # 3. Honest outcome after: approved while free, taken before it ran: nothing was booked.
    r15_start, r15_end = slot(days=3, hour=16)
    overtaken = ask(e17, "R15", r15_start, r15_end)
    page.reload()
    card = page.locator(f"#request-{overtaken.pk}")
    card.get_by_label("Reason").fill("Customer visit")
    card.get_by_role("button", name="Approve").click()
    expect(page.locator(f"tr[data-request='{overtaken.pk}']")).to_be_visible()
    take(e23, "R15", r15_start, r15_end, "e23-r15")
    run_the_decision(overtaken)
    page.reload()
    row = page.locator(f"tr[data-request='{overtaken.pk}']")
    expect(row.locator("td.outcome")).to_contain_text("Approved, but it did not run")
    expect(row.locator("td.outcome")).to_contain_text("R15 was taken meanwhile")
    expect(row.locator("td.outcome")).to_contain_text("Nothing was booked")
    assert not Booking.objects.filter(requester=e17).exists()
    shoot(page, "approvals-decided-outcomes")
    page.goto(f"/approvals/{overtaken.pk}/")
    expect(page.locator(".outcome")).to_contain_text("R15 was taken meanwhile")
    expect(page.locator(".history")).to_contain_text("Requested")
    expect(page.locator(".history")).to_contain_text("Approved")
    shoot(page, "approvals-detail")

    # The requester's side: the same truth on My bookings.
    log_in(page, "e17")
    page.goto("/bookings/")
    mine = page.locator(f"tr[data-request='{overtaken.pk}']")
    expect(mine).to_contain_text("Approved, but it did not run")
    expect(mine).to_contain_text("R15 was taken meanwhile")
    expect(page.locator(f"tr[data-request='{warned.pk}']")).to_contain_text(
        "It cannot be approved as it is"
    )
    expect(page.locator(f"tr[data-request='{refused.pk}']")).to_contain_text("R12 is taken")
    shoot(page, "requester-outcomes")


def test_a_chinese_approver_reads_the_reasons_in_chinese(e17, e23, approver, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    start, end = slot(days=3, hour=10)
    ask(e17, "R12", start, end)
    take(e23, "R12", start, slot(days=3, hour=10, minute=30)[0], "e23-r12")
    log_in(page, "a01")
    page.get_by_role("button", name="简体中文").click()
    page.goto("/approvals/")
    card = page.locator("article.approval")
    expect(card).to_contain_text("R12 属于销售部，而不是研发部")
    expect(card.locator(".present")).to_contain_text("R12 在此期间已被占用")
    expect(card).to_contain_text("在预订页面上")
    expect(card).not_to_contain_text("belongs to")
    shoot(page, "approvals-zh")
    # The Decided table's outcome column keeps whole words on a line in Chinese.
    card.get_by_label("理由").fill("已被占用")
    card.get_by_role("button", name="拒绝").click()
    r15_start, r15_end = slot(days=3, hour=16)
    overtaken = ask(e17, "R15", r15_start, r15_end)
    page.reload()
    card = page.locator(f"#request-{overtaken.pk}")
    card.get_by_label("理由").fill("客户来访")
    card.get_by_role("button", name="批准").click()
    expect(page.locator(f"tr[data-request='{overtaken.pk}']")).to_be_visible()
    take(e23, "R15", r15_start, r15_end, "e23-r15")
    run_the_decision(overtaken)
    page.reload()
    cell = page.locator(f"tr[data-request='{overtaken.pk}'] td.outcome")
    expect(cell).to_contain_text("已批准，但未执行")
    expect(cell).to_contain_text("R15 在此期间已被占用")
    box = cell.bounding_box()
    assert box["width"] > 150, box  # not one character per line
    assert box["height"] < 8 * 24, box
    shoot(page, "approvals-zh-decided")


def test_the_queue_and_the_audit_log_explain_themselves(e17, admin_user, browser_page):
    from playwright.sync_api import expect

    user_create("o01", roles=[EMPLOYEES, "operators"])
    page = browser_page
    log_in(page, "o01")
    page.get_by_role("link", name="Reconciliation").click()
    expect(page.locator(".explain")).to_contain_text("An unclear write is")
    expect(page.locator(".explain")).to_contain_text("Retry with the same key")
    expect(page.locator(".empty-state").first).to_contain_text("Something appears when")
    shoot(page, "queue-explained")

    start, end = slot(days=3, hour=9)
    take(e17, "R7", start, end, "e17-r7")
    tool_call_governed(
        user=e17,
        name="find_available_rooms",
        arguments={"start_at": start.isoformat(), "end_at": end.isoformat(), "attendees": 2},
        channel="web",
    )
    log_in(page, "admin")
    page.goto("/ops/audit/")
    row = page.locator("table.audit tbody tr").first
    expect(row).to_contain_text("Look for free rooms")
    expect(row.locator("details pre.json").first).to_be_hidden()
    row.locator("details summary").click()
    expect(row.locator("details pre.json").first).to_be_visible()
    shoot(page, "audit-log")
