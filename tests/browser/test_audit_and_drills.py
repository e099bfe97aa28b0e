"""Admins in real Chromium: filter the audit log, open a run's story, export CSV; run the drills
and watch five pass."""

from __future__ import annotations

import csv
import io

import pytest

from agentops.runtime.runs import run_start
from bookings.models import Booking
from tests.accounts.factories import PASSWORD
from tests.browser.conftest import ARTIFACTS
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("rooms")]


def log_in(page, username: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username", exact=True).fill(username)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def test_an_admin_filters_the_audit_log_opens_a_run_and_exports_csv(
    worker, e17, e23, admin_user, browser_page
):
    from playwright.sync_api import expect

    start, end = slot(days=3)
    when = f"{start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M}"
    mine = wait_for_run(run_start(user=e17, request_text=f"Book a room on {when} for 3 people").pk)
    wait_for_run(run_start(user=e23, request_text=f"Book a room on {when} for 2 people").pk)
    assert mine.status == "succeeded"
    reserve = mine.actions.get(tool="reserve_room")

    page = browser_page
    log_in(page, "admin")
    page.get_by_role("link", name="Audit log").click()
    expect(page.locator("tr[data-kind=tool]")).to_have_count(4)
    page.evaluate("window.stillTheSamePage = true")

    page.get_by_label("User", exact=True).fill("e17")
    page.get_by_label("Tool", exact=True).select_option("reserve_room")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("tr[data-kind]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("reserve_room")
    expect(rows.first).to_contain_text("e17")
    assert page.evaluate("window.stillTheSamePage") is True  # filtered in place (htmx)
    assert "tool=reserve_room" in page.url
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "audit-log-filtered.png"), full_page=True)

    with page.expect_download() as download:
        page.get_by_role("button", name="Export CSV").click()
    text = download.value.path().read_text(encoding="utf-8")
    records = list(csv.DictReader(io.StringIO(text)))
    assert [(r["username"], r["name"]) for r in records] == [("e17", "reserve_room")]
    assert records[0]["idempotency_key"] == reserve.idempotency_key
    assert records[0]["request"] == "[redacted]" and "3 people" not in text

    rows.first.locator("details summary").click()  # the record, with the run's link
    rows.first.get_by_role("link").click()
    expect(page.get_by_role("heading", name=f"Run {mine.pk}")).to_be_visible()
    expect(page.locator(".goal")).to_contain_text("for 3 people")
    expect(page.locator('[data-tool="reserve_room"] .key')).to_have_text(reserve.idempotency_key)
    expect(page.locator(".receipt")).to_contain_text(Booking.objects.get(requester=e17).code)
    expect(page.locator(".verification[data-holds=true]")).to_be_visible()
    expect(page.locator(".trace-check")).to_have_attribute("data-ok", "true")
    page.screenshot(path=str(ARTIFACTS / "run-detail.png"), full_page=True)


def test_the_drills_screen_shows_five_passes(worker, admin_user, browser_page, settings):
    from playwright.sync_api import expect

    settings.AGENT_RETRY_BACKOFF_SCALE = 0
    page = browser_page
    log_in(page, "admin")
    page.get_by_role("link", name="Drills").click()
    expect(page.get_by_text("No drill has run yet.")).to_be_visible()
    page.get_by_role("button", name="Run the drills").click()
    section = page.locator("#drill")
    expect(section).to_have_attribute("data-status", "passed", timeout=120_000)
    expect(page.locator(".drill-result")).to_have_count(5)
    expect(page.locator(".drill-result[data-passed=true]")).to_have_count(5)
    expect(page.locator(".trace[data-ok=true]")).to_have_count(6)  # drill 5 has two runs
    page.screenshot(path=str(ARTIFACTS / "drills-five-passes.png"), full_page=True)
