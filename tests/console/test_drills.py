"""Drills: the five trajectories of seed 000 rehearsed by the real worker in a sandbox of rooms
of their own; real bookings and rooms stay untouched; running them is audited."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.models import AuditAction, AuditEntry, User
from agentops.models import DrillRun
from agentops.runtime.drills import drill_start
from bookings.models import Booking, Room
from bookings.selectors import room_search
from bookings.services import booking_reserve
from tests.conftest import slot
from tests.workers import wait_until

pytestmark = pytest.mark.usefixtures("rooms")

KEYS = ["normal", "taken", "search_timeout", "lost_receipt", "refused"]


def real_state():
    rooms = dict(Room.objects.filter(sandbox=False).values_list("code", "schedule_version"))
    bookings = list(
        Booking.objects.filter(room__sandbox=False).order_by("id").values_list("code", "status")
    )
    return rooms, bookings


def wait_for_drill(drill_id) -> DrillRun:
    return wait_until(
        lambda: DrillRun.objects.filter(pk=drill_id, status__in=["passed", "failed"]).first(),
        timeout=120,
        message="the drill run to finish",
    )


@pytest.mark.integration
def test_the_drills_pass_through_the_worker_and_touch_no_real_booking(
    worker, client, e17, admin_user, settings
):
    settings.AGENT_RETRY_BACKOFF_SCALE = 0  # the search-timeout drill retries at once
    start, end = slot(days=7, hour=9)  # the drills' own day and hour, in real rooms
    booking_reserve(
        user=e17, room_code="R7", start_at=start, end_at=end, attendees=2, idempotency_key="real"
    )
    before = real_state()
    client.force_login(admin_user)

    response = client.post(reverse("ops:drill-start"), headers={"HX-Request": "true"})
    assert response.status_code == 200
    drill = wait_for_drill(DrillRun.objects.get().pk)

    assert drill.status == "passed", [(r["key"], r["problems"]) for r in drill.results]
    assert [r["key"] for r in drill.results] == KEYS
    assert all(r["passed"] and r["trace_ok"] for r in drill.results)
    assert real_state() == before
    taken = next(r for r in drill.results if r["key"] == "taken")
    assert sorted(row["room"] for row in taken["rows"]) == ["R9007", "R9009"]
    refused = next(r for r in drill.results if r["key"] == "refused")
    assert len(refused["runs"]) == 2 and refused["rows"] == []
    entry = AuditEntry.objects.get(action=AuditAction.DRILL_RUN)
    assert (entry.actor, entry.target) == (admin_user, f"drill:{drill.pk}")

    html = client.get(reverse("ops:drill", args=[drill.pk])).content.decode()
    assert html.count('data-passed="true"') == 5 and 'hx-trigger="load' not in html

    # Again: the sandbox starts clean, so the same five pass again.
    drill2 = wait_for_drill(drill_start(user=admin_user).pk)
    assert drill2.status == "passed", [(r["key"], r["problems"]) for r in drill2.results]
    assert real_state() == before


@pytest.mark.integration
def test_a_drill_that_fails_says_why(worker, admin_user, settings, monkeypatch):
    """A sandbox whose rival books nothing: the 'taken' drill fails and names the problem."""
    from bookings import drills

    settings.AGENT_RETRY_BACKOFF_SCALE = 0
    monkeypatch.setattr(drills, "booking_reserve", lambda **kwargs: None)
    drill = wait_for_drill(drill_start(user=admin_user).pk)

    assert drill.status == "failed"
    verdicts = {r["key"]: r["passed"] for r in drill.results}
    assert verdicts == {
        "normal": True,
        "taken": False,
        "search_timeout": True,
        "lost_receipt": True,
        "refused": True,
    }
    taken = next(r for r in drill.results if r["key"] == "taken")
    assert "rival does not hold R9007" in taken["problems"]


@pytest.mark.django_db
def test_a_second_press_while_one_runs_returns_the_same_drill_run(admin_user):
    first = drill_start(user=admin_user)
    assert drill_start(user=admin_user).pk == first.pk
    assert AuditEntry.objects.filter(action=AuditAction.DRILL_RUN).count() == 1


@pytest.mark.django_db
def test_employees_cannot_run_drills(client, e17):
    client.force_login(e17)
    assert client.post(reverse("ops:drill-start")).status_code == 403
    assert client.get(reverse("ops:drills")).status_code == 403
    assert not DrillRun.objects.exists()
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_sandbox_rooms_are_invisible_to_normal_searches_and_drill_users_see_only_them(e17):
    from bookings.drills import REQUESTER, SANDBOX

    SANDBOX.prepare()
    start, end = slot(days=3)
    normal = {a.room.code for a in room_search(start_at=start, end_at=end, attendees=3)}
    as_e17 = {a.room.code for a in room_search(start_at=start, end_at=end, attendees=3, user=e17)}
    drill_user = User.objects.get(username=REQUESTER)
    drill = {
        a.room.code for a in room_search(start_at=start, end_at=end, attendees=3, user=drill_user)
    }
    assert normal == as_e17 and "R7" in normal and not normal & {"R9007", "R9009"}
    assert drill == {"R9007", "R9009"}
    assert not drill_user.has_usable_password()
    # The search's other facts stay on each side of the line too.
    from bookings.selectors import room_get, room_largest_capacity

    assert room_get(code="R9007", user=e17) is None and room_get(code="R9007") is None
    assert room_get(code="R7", user=drill_user) is None
    assert room_get(code="R9007", user=drill_user).sandbox
    assert (room_largest_capacity(user=e17), room_largest_capacity(user=drill_user)) == (16, 6)


@pytest.mark.django_db
@pytest.mark.parametrize(("who", "room"), [("e17", "R9007"), ("drill", "R7")])
def test_nobody_books_across_the_sandbox_line(e17, who, room):
    from bookings.drills import REQUESTER, SANDBOX
    from bookings.errors import BookingError

    SANDBOX.prepare()
    user = e17 if who == "e17" else User.objects.get(username=REQUESTER)
    versions = dict(Room.objects.values_list("code", "schedule_version"))
    start, end = slot(days=3)
    with pytest.raises(BookingError, match="no room"):
        booking_reserve(
            user=user, room_code=room, start_at=start, end_at=end, attendees=2, idempotency_key="x"
        )
    assert not Booking.objects.exists()
    assert dict(Room.objects.values_list("code", "schedule_version")) == versions
