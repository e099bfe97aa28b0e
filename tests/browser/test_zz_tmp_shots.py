from datetime import timedelta
from django.utils import timezone
from bookings.demo import load_demo_data
from bookings.models import User, Room
from bookings.services import booking_reserve
from tests.conftest import slot

def test_shots(transactional_db, browser_page):
    load_demo_data()
    Room.objects.filter(code="R9").update(notes="<b>Bring</b> your own HDMI adapter; the projector remote lives in the drawer under the window. Please leave the room tidy for the next team, thanks!")
    e17 = User.objects.get(username="e17")
    for i, (room, d, h) in enumerate([("R5", 2, 9), ("R9", 3, 16), ("R3", 5, 11)]):
        s, e = slot(days=d, hour=h)
        booking_reserve(user=e17, room_code=room, start_at=s, end_at=e, attendees=3, idempotency_key=f"s{i}")
    page = browser_page
    page.goto("/login/")
    page.screenshot(path="/tmp/shot-login.png")
    page.get_by_label("Username", exact=True).fill("e17")
    page.get_by_label("Password", exact=True).fill("e17-demo-pass")
    page.get_by_role("button", name="Log in").click()
    tomorrow = timezone.localdate() + timedelta(days=1)
    page.goto(f"/?date={tomorrow}&start=14:00&end=15:00&attendees=3&equipment=projector")
    page.locator('[data-room="R7"] button').click()
    page.locator(".alert-ok").wait_for()
    page.screenshot(path="/tmp/shot-search.png", full_page=True)
    page.goto(f"/?date={tomorrow}&start=15:00&end=14:00&attendees=3")
    page.screenshot(path="/tmp/shot-search-error.png", full_page=True)
    page.goto("/bookings/")
    page.once("dialog", lambda d: d.accept())
    page.locator("tr[data-status=confirmed] button").last.click()
    page.locator("tr[data-status=cancelled]").wait_for()
    page.screenshot(path="/tmp/shot-mine.png", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path="/tmp/shot-mine-phone.png", full_page=True)
    page.goto(f"/?date={tomorrow}&start=14:00&end=15:00&attendees=3&equipment=projector")
    page.screenshot(path="/tmp/shot-search-phone.png", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
