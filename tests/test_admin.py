"""The Django admin: every page opens, runtime records are read-only, bookings change only
through the booking service (an audited cancel), room edits are audited and never move the
schedule version, token revocation is audited."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from accounts.models import ApiToken, AuditAction, AuditEntry
from accounts.services import audit_record, token_issue
from agentops.runtime.direct import tool_call_governed
from approvals.models import ApprovalRecord, ApprovalRequest
from approvals.services import approval_decide
from bookings.admin import RoomAdmin
from bookings.models import Booking, Room
from bookings.services import booking_reserve
from tests.conftest import slot
from tests.workers import celery_worker_thread, wait_until, worker  # noqa: F401

pytestmark = [pytest.mark.usefixtures("rooms")]


def _admin_url(model, view: str, *args) -> str:
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def _reserve(user, room: str = "R7", days: int = 3) -> Booking:
    start, end = slot(days=days, hour=14)
    return booking_reserve(
        user=user, room_code=room, start_at=start, end_at=end, attendees=2, idempotency_key=room
    ).booking


@pytest.fixture
def admin_client(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def everything(e17, approver, admin_user):
    """At least one row of every model the admin shows: a booking made through the runtime, an
    approval decided in the inbox's service, a token, an audit entry. Needs the worker (it runs
    the approved call): tests using it say `usefixtures("worker")` first."""
    start, end = slot(days=4, hour=10)
    tool_call_governed(
        user=e17,
        name="reserve_room",
        arguments={
            "room_id": "R7",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": 2,
            "expected_version": Room.objects.get(code="R7").schedule_version,
        },
    )
    pending = tool_call_governed(
        user=e17,
        name="reserve_room",
        arguments={
            "room_id": "R16",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": 8,
            "expected_version": Room.objects.get(code="R16").schedule_version,
        },
    )
    assert pending["code"] == "approval_pending"
    request = ApprovalRequest.objects.get()
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    wait_until(lambda: Booking.objects.filter(room__code="R16").exists(), message="R16 booked")
    token_issue(user=e17, name="laptop")
    audit_record(actor=admin_user, action=AuditAction.DRILL_RUN, target="drill:all")
    assert ApprovalRecord.objects.exists()


@pytest.mark.usefixtures("worker")
def test_every_admin_list_add_and_change_page_opens(everything, admin_user, admin_client, rf):
    request = rf.get("/")
    request.user = admin_user
    opened = []
    for model, model_admin in admin.site._registry.items():
        obj = model._default_manager.order_by("pk").first()
        assert obj is not None, f"no {model.__name__} to open"
        changelist = _admin_url(model, "changelist")
        pages = [changelist, _admin_url(model, "change", obj.pk)]
        if model_admin.search_fields:  # odd searches are answered, not 500s
            pages += [f"{changelist}?q=B1%27%22", f"{changelist}?q=a%00b"]
        pages.append(_admin_url(model, "history", obj.pk))
        if model_admin.has_add_permission(request):
            pages.append(_admin_url(model, "add"))
        if model_admin.has_delete_permission(request, obj):
            pages.append(_admin_url(model, "delete", obj.pk))
        for url in pages:
            response = admin_client.get(url)
            assert response.status_code == 200, (url, response.status_code)
            opened.append(url)
    assert len(opened) >= 3 * 13


@pytest.mark.parametrize(
    "model",
    ["AgentRun", "Action", "TraceEvent", "IdempotencyRecord", "ApprovalRequest", "AuditEntry"],
)
@pytest.mark.usefixtures("worker")
def test_runtime_records_are_read_only(everything, admin_client, model):
    cls = next(m for m in admin.site._registry if m.__name__ == model)
    obj = cls._default_manager.order_by("pk").first()
    assert admin_client.get(_admin_url(cls, "add")).status_code == 403
    assert admin_client.post(_admin_url(cls, "change", obj.pk), {}).status_code == 403
    assert admin_client.post(_admin_url(cls, "delete", obj.pk), {"post": "yes"}).status_code == 403
    assert cls._default_manager.filter(pk=obj.pk).exists()


def _booking_state():
    return (
        list(Booking.objects.order_by("pk").values()),
        dict(Room.objects.values_list("code", "schedule_version")),
        AuditEntry.objects.count(),
    )


def test_a_booking_cannot_be_added_edited_or_deleted_by_hand(db, e17, admin_client):
    booking = _reserve(e17)
    before = _booking_state()
    change = _admin_url(Booking, "change", booking.pk)

    page = admin_client.get(change)
    assert page.status_code == 200
    assert 'name="status"' not in page.content.decode()  # nothing to edit on the page
    cancelled = {"status": "cancelled", "attendees": 3, "room": booking.room_id}
    assert admin_client.post(change, cancelled).status_code == 403
    assert admin_client.get(_admin_url(Booking, "add")).status_code == 403
    added = {"room": booking.room_id, "requester": e17.pk, "attendees": 1}
    assert admin_client.post(_admin_url(Booking, "add"), added).status_code == 403
    deleted = admin_client.post(_admin_url(Booking, "delete", booking.pk), {"post": "yes"})
    assert deleted.status_code == 403
    assert _booking_state() == before


def test_bookings_show_local_times(db, e17, admin_client):
    _reserve(e17)
    html = admin_client.get(_admin_url(Booking, "changelist")).content.decode()
    assert "14:00" in html and "15:00" in html  # Shanghai wall-clock times, not UTC (06:00)


@pytest.mark.django_db(transaction=True)
def test_the_cancel_action_goes_through_the_runtime_and_waits_for_another_approver(
    e17, admin_user, approver, admin_client
):
    """An admin's cancel of someone else's booking is an Action of cancel_booking with its
    trace, HIGH by policy: it waits for an approver who is not the admin, and cancels nothing
    until then (README, "Approvals")."""
    from agentops.models import Action

    booking = _reserve(e17)
    version = Room.objects.get(code="R7").schedule_version

    response = admin_client.post(
        _admin_url(Booking, "changelist"), {"action": "cancel", "_selected_action": [booking.pk]}
    )

    assert response.status_code == 302
    action = Action.objects.get(tool="cancel_booking")
    assert action.status == "waiting_approval"
    assert action.run.subject == admin_user
    assert action.run.events.exists()  # its trace
    booking.refresh_from_db()
    assert booking.status == "confirmed"
    assert Room.objects.get(code="R7").schedule_version == version
    request = ApprovalRequest.objects.get()
    # The admin cannot approve their own request; another approver can.
    assert not approval_decide(
        request_id=request.pk, approver=admin_user, approve=True, reason="mine"
    ).ok
    assert ApprovalRequest.objects.get().status == "pending"


@pytest.mark.django_db(transaction=True)
def test_an_admins_cancel_of_their_own_booking_is_done_at_once_as_an_action(
    admin_user, admin_client
):
    from agentops.models import Action

    booking = _reserve(admin_user)
    admin_client.post(
        _admin_url(Booking, "changelist"), {"action": "cancel", "_selected_action": [booking.pk]}
    )
    booking.refresh_from_db()
    assert booking.status == "cancelled" and booking.cancelled_by == admin_user
    action = Action.objects.get(tool="cancel_booking")
    assert action.status == "succeeded"
    # Its trace: the gate's decision and the call's outcome (a direct call records no
    # verification event yet: see the report).
    assert {"gate", "execution_finished"} <= set(action.run.events.values_list("kind", flat=True))


def test_a_staff_member_who_is_not_an_admin_cannot_cancel(db, e17, admin_client):
    from django.contrib.auth.models import Permission

    from tests.accounts.factories import user_create

    staff = user_create("s01")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(*Permission.objects.filter(codename="view_booking"))
    booking = _reserve(e17)
    client = Client()
    client.force_login(staff)
    before = _booking_state()

    response = client.post(
        _admin_url(Booking, "changelist"), {"action": "cancel", "_selected_action": [booking.pk]}
    )

    assert response.status_code < 500
    assert _booking_state() == before


def _room_form(room: Room, **changes) -> dict:
    data = {
        "name": room.name,
        "capacity": room.capacity,
        "equipment": ",".join(room.equipment),
        "department": room.department,
        "floor": room.floor,
        "notes": room.notes,
        "bookable": "on" if room.bookable else "",
        "requires_approval": "on" if room.requires_approval else "",
        "checkin_required": "on" if room.checkin_required else "",
    }
    return {k: v for k, v in (data | changes).items() if v != ""}


def test_a_room_edit_is_audited_and_keeps_the_schedule_version(db, e17, admin_user, admin_client):
    _reserve(e17)
    room = Room.objects.get(code="R7")
    data = _room_form(room, name="Bamboo (renovated)", schedule_version=0, code="R70")

    response = admin_client.post(_admin_url(Room, "change", room.pk), data)

    assert response.status_code == 302
    after = Room.objects.get(pk=room.pk)
    assert (after.code, after.name) == ("R7", "Bamboo (renovated)")
    assert after.schedule_version == room.schedule_version == 1
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target) == (AuditAction.ADMIN_CHANGED, "room:R7")
    assert entry.detail["changed"] == {"name": [room.name, "Bamboo (renovated)"]}


def test_a_room_edit_from_a_stale_form_does_not_undo_a_booking_s_version(db, e17, admin_user, rf):
    stale = Room.objects.get(code="R7")  # the admin opened the form at version 0 ...
    _reserve(e17)  # ... a booking moved it to 1 ...
    request = rf.post("/")
    request.user = admin_user
    room_admin = RoomAdmin(Room, admin.site)
    form = room_admin.get_form(request, stale)(
        data=_room_form(stale, notes="Quiet."), instance=stale
    )
    assert form.is_valid(), form.errors

    room_admin.save_model(request, form.save(commit=False), form, change=True)

    room = Room.objects.get(code="R7")
    assert (room.notes, room.schedule_version) == ("Quiet.", 1)  # ... and it stays 1


def test_an_invalid_room_edit_is_a_form_error_not_a_500(db, admin_client):
    room = Room.objects.get(code="R7")
    response = admin_client.post(_admin_url(Room, "change", room.pk), _room_form(room, capacity=0))
    assert response.status_code == 200
    html = response.content.decode()
    assert "room_capacity_positive" not in html and "greater than or equal to 1" in html
    assert Room.objects.get(code="R7").capacity == room.capacity
    assert AuditEntry.objects.count() == 0


def test_revoking_a_token_in_the_admin_is_audited(db, e17, admin_user, admin_client):
    token_issue(user=e17, name="laptop")
    token = ApiToken.objects.get()

    response = admin_client.post(
        _admin_url(ApiToken, "changelist"), {"action": "revoke", "_selected_action": [token.pk]}
    )

    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    entry = AuditEntry.objects.get(action=AuditAction.TOKEN_REVOKED)  # after token.issued
    assert (entry.actor, entry.action, entry.target) == (
        admin_user,
        AuditAction.TOKEN_REVOKED,
        f"token:{token.prefix}",
    )
    assert admin_client.post(_admin_url(ApiToken, "change", token.pk), {}).status_code == 403


def test_adding_a_user_in_the_admin_is_audited_without_secrets(db, e17, admin_client):
    response = admin_client.post(
        _admin_url(type(e17), "add"),
        {"username": "o02", "password1": "A-long-pass-123", "password2": "A-long-pass-123"},
    )
    assert response.status_code == 302
    entry = AuditEntry.objects.get()
    assert entry.action == AuditAction.ADMIN_CHANGED and entry.detail["added"] is True
    assert "A-long-pass-123" not in str(entry.detail)


@pytest.mark.parametrize("selected", ["not-a-pk", "1.5", "", "\x00", "1e3"])
@pytest.mark.parametrize(("model", "action"), [(Booking, "cancel"), (ApiToken, "revoke")])
def test_an_action_on_a_selection_that_is_not_a_key_is_400_and_changes_nothing(
    db, e17, admin_client, model, action, selected
):
    _reserve(e17)
    token_issue(user=e17)
    before = (_booking_state(), list(ApiToken.objects.values_list("pk", "revoked_at")))
    audits = AuditEntry.objects.count()

    response = admin_client.post(
        _admin_url(model, "changelist"), {"action": action, "_selected_action": [selected]}
    )

    assert response.status_code == 400
    assert (_booking_state(), list(ApiToken.objects.values_list("pk", "revoked_at"))) == before
    assert AuditEntry.objects.count() == audits
