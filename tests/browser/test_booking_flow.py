from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from bookings.models import Booking, BookingStatus
from tests.accounts.factories import PASSWORD

pytestmark = pytest.mark.browser


def test_employee_books_and_cancels_a_room_through_htmx(transactional_db, rooms, e17, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    tomorrow = timezone.localdate() + timedelta(days=1)

    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.get_by_label("Username", exact=True).fill("e17")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Find a room")).to_be_visible()
    expect(page.locator(".whoami")).to_contain_text("e17")
    assert page.evaluate("typeof window.htmx") == "object"
    # Survives only if nothing below reloads the page: every step must go through htmx.
    page.evaluate("window.stillTheSamePage = true")

    page.get_by_label("Date", exact=True).fill(tomorrow.isoformat())
    page.get_by_label("From", exact=True).fill("14:00")
    page.get_by_label("To", exact=True).fill("15:00")
    page.get_by_label("People", exact=True).fill("3")
    page.get_by_label("projector", exact=True).check()
    page.get_by_role("button", name="Search").click()
    r7 = page.locator('[data-room="R7"]')
    expect(r7).to_be_visible()
    expect(page.locator('[data-room="R9"]')).to_be_visible()
    expect(page).to_have_url(re.compile(r"start=14%3A00.*equipment=projector"))

    r7.get_by_role("button", name="Book").click()
    confirmation = r7.locator(".alert-ok")
    expect(confirmation).to_contain_text(f"Booked R7, {tomorrow.day} {tomorrow:%b} 14:00")
    code = confirmation.get_attribute("data-booking")
    assert code
    expect(confirmation).to_contain_text(f"code {code}")
    assert page.evaluate("window.stillTheSamePage") is True

    confirmation.get_by_role("link", name="My bookings").click()
    row = page.locator(f"#booking-{code}")
    expect(row).to_contain_text("R7")
    expect(row).to_contain_text("14:00\u201315:00")
    expect(row).to_have_attribute("data-status", "confirmed")
    page.evaluate("window.stillTheSamePage = true")

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name=f"Cancel {code}").click()
    expect(row).to_have_attribute("data-status", "cancelled")
    expect(row).to_contain_text("Cancelled")
    expect(row.get_by_role("button")).to_have_count(0)
    assert page.evaluate("window.stillTheSamePage") is True

    booking = Booking.objects.get()
    assert (booking.code, booking.room.code, booking.requester.username) == (code, "R7", "e17")
    assert booking.status == BookingStatus.CANCELLED
    assert booking.attendees == 3
