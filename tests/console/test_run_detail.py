"""The run detail page: the whole story of one run from the database. Admins see every run, its
subject their own; anyone else gets 404, as from the JSON API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from accounts.models import Role
from agentops.runtime.runs import run_start
from approvals.models import ApprovalRequest
from bookings.models import Booking
from tests.agentops.factories import decision_create, run_create
from tests.conftest import slot
from tests.workers import wait_for_run

START, END = slot(days=2)
REQUEST = f"Book a room on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"


@pytest.mark.integration
@pytest.mark.usefixtures("rooms")
def test_the_story_of_a_real_run(worker, client, e17, admin_user, approver):
    run = wait_for_run(run_start(user=e17, request_text=REQUEST).pk)
    assert run.status == "succeeded"
    booking = Booking.objects.get()
    reserve = run.actions.get(tool="reserve_room")
    ApprovalRequest.objects.create(
        action_ref=str(reserve.pk),
        run_ref=str(run.pk),
        requester=e17,
        binding={"idempotency_key": reserve.idempotency_key, "environment_version": 17},
        intent={"tool": "reserve_room"},
        deadline=timezone.now() + timedelta(minutes=30),
    )
    decision_create(approver, run=run, reason="Fine by me")

    client.force_login(admin_user)
    html = client.get(reverse("ops:run", args=[run.pk])).content.decode()

    assert "e17" in html and "E17" in html and REQUEST in html  # who asked what
    assert "find_available_rooms" in html and "reserve_room" in html  # every proposal
    assert html.count('class="gate"') == 2 and "execute" in html  # each gate decision
    assert reserve.idempotency_key in html  # idempotency keys
    assert f"&quot;booking_id&quot;: &quot;{booking.code}&quot;" in html  # the receipt
    assert "The current database confirms the receipt." in html  # verification
    assert "&quot;environment_version&quot;: 17" in html  # the approval's binding
    assert "Fine by me" in html and "a01" in html  # the human decision
    assert "took" in html and "started after" in html  # timings
    assert 'data-ok="true"' in html  # the trace reconstructs
    assert html.count("data-seq=") == run.events.count()


@pytest.mark.django_db
def test_the_owner_sees_their_own_run_others_get_404(client, e17, e23):
    run = run_create(e17)
    url = reverse("ops:run", args=[run.pk])
    client.force_login(e17)
    assert client.get(url).status_code == 200
    client.force_login(e23)
    assert client.get(url).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("run_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_run_is_404(client, admin_user, run_id):
    client.force_login(admin_user)
    assert client.get(reverse("ops:run", args=[run_id])).status_code == 404


@pytest.mark.django_db
def test_an_anonymous_visitor_is_sent_to_log_in(client, e17):
    run = run_create(e17)
    response = client.get(reverse("ops:run", args=[run.pk]))
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.django_db
def test_my_bookings_links_a_booking_to_the_run_that_created_it(client, e17, rooms):
    from bookings.services import booking_reserve

    run = run_create(e17)
    booking_reserve(
        user=e17,
        room_code="R7",
        start_at=START,
        end_at=END,
        attendees=2,
        idempotency_key="k1",
        run_id=str(run.pk),
    )
    booking_reserve(
        user=e17, room_code="R9", start_at=START, end_at=END, attendees=2, idempotency_key="k2"
    )
    # An employee's page names no run (engine internals belong to admins' screens).
    client.force_login(e17)
    html = client.get(reverse("bookings:mine")).content.decode()
    assert "run detail" not in html and reverse("ops:run", args=[run.pk]) not in html
    # An admin looking at their own bookings keeps the link to the run's story.
    e17.groups.add(Group.objects.get_or_create(name=Role.ADMIN)[0])
    html = client.get(reverse("bookings:mine")).content.decode()
    assert html.count("run detail") == 1
    assert reverse("ops:run", args=[run.pk]) in html


@pytest.mark.django_db
def test_a_trace_with_a_gap_or_no_terminal_event_does_not_reconstruct(client, admin_user, e17):
    from agentops.models import EventKind, TraceEvent
    from agentops.runtime.story import trace_problems
    from agentops.runtime.trace import trace_append
    from tests.agentops.factories import action_create

    run = run_create(e17)
    action_create(run)
    assert trace_problems(run=run) == ["does not end in run_finished"]
    trace_append(run=run, kind=EventKind.RUN_FINISHED, payload={"status": "succeeded"})
    assert trace_problems(run=run) == []

    TraceEvent.objects.filter(run=run, seq=2).delete()
    problems = trace_problems(run=run)
    assert problems[0] == "sequence has gaps or repeats: [1, 3]"
    assert any("has no gate decision first" in p for p in problems)
    client.force_login(admin_user)
    html = client.get(reverse("ops:run", args=[run.pk])).content.decode()
    assert 'data-ok="false"' in html and "sequence has gaps" in html


@pytest.mark.django_db
def test_the_django_admin_links_a_booking_to_its_run(client, admin_user, e17, rooms):
    from bookings.services import booking_reserve

    run = run_create(e17)
    made = booking_reserve(
        user=e17,
        room_code="R7",
        start_at=START,
        end_at=END,
        attendees=2,
        idempotency_key="k1",
        run_id=str(run.pk),
    )
    client.force_login(admin_user)
    url = reverse("admin:bookings_booking_change", args=[made.booking.pk])
    html = client.get(url).content.decode()
    assert f'href="{reverse("ops:run", args=[run.pk])}"' in html
