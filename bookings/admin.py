"""Rooms and bookings in the Django admin.

Bookings change only through the booking service: the admin shows them and cancels them through
the runtime (``cancel_booking``: an Action with its trace, like every channel); nobody adds, edits or deletes one by hand. Rooms may be
edited (name, notes, bookable, ...), audited, and never touch the schedule version, which only
the booking service moves.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.translation import gettext, gettext_lazy, ngettext

from accounts.admin import AuditedAdmin, ReadOnlyAdmin, admin_user
from accounts.models import Role
from accounts.selectors import user_roles
from bookings import services
from bookings.errors import BookingError
from bookings.models import Booking, BookingStatus, Room


class RoomForm(forms.ModelForm):
    # The database's check says the same; the form says it in words, not a constraint's name.
    capacity = forms.IntegerField(min_value=1, max_value=500, label=gettext_lazy("Capacity"))

    class Meta:
        model = Room
        fields = (
            "code",
            "name",
            "capacity",
            "equipment",
            "department",
            "floor",
            "notes",
            "bookable",
            "requires_approval",
            "checkin_required",
        )


@admin.register(Room)
class RoomAdmin(AuditedAdmin[Room]):
    form = RoomForm
    list_display = (
        "code",
        "name",
        "capacity",
        "department",
        "floor",
        "bookable",
        "requires_approval",
        "schedule_version",
    )
    list_filter = ("department", "floor", "bookable", "requires_approval", "checkin_required")
    search_fields = ("code", "name")
    audit_kind = "room"

    def get_readonly_fields(self, request: HttpRequest, obj: Room | None = None) -> tuple:
        # A room's code is in receipts and approvals: fixed once the room exists.
        return ("code", "schedule_version") if obj is not None else ("schedule_version",)

    def audit_target(self, obj: Room) -> str:
        return f"room:{obj.code}"

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Bookings point at rooms; a room that should go away is made not bookable.
        return False

    def save_changes(self, request: HttpRequest, obj: Room, form: ModelForm, change: bool) -> None:
        if not change:
            obj.save()
            return
        # Write only what the form changed, under the room's row lock (the lock every schedule
        # write takes first): a version a booking moved meanwhile stays as it is.
        fresh = Room.objects.select_for_update().get(pk=obj.pk)
        fields = [f for f in form.changed_data if f != "schedule_version"]
        if fields:
            obj.save(update_fields=fields)
        obj.schedule_version = fresh.schedule_version


def _local(moment: datetime) -> str:
    return formats.date_format(timezone.localtime(moment), "SHORT_DATETIME_FORMAT")


@admin.register(Booking)
class BookingAdmin(ReadOnlyAdmin):
    list_display = ("code", "room", "requester", "starts", "ends", "attendees", "status")
    list_filter = ("status", "room")
    search_fields = ("code", "idempotency_key", "requester__username")
    list_select_related = ("room", "requester")
    fields = (
        "code",
        "room",
        "requester",
        "starts",
        "ends",
        "attendees",
        "status",
        "idempotency_key",
        "created_by_run",
        "action_id",
        "created_version",
        "cancelled_version",
        "created_at",
        "cancelled_at",
        "cancelled_by",
    )
    readonly_fields = fields
    actions = ["cancel"]

    @admin.display(description=gettext_lazy("Starts"), ordering="during")
    def starts(self, booking: Booking) -> str:
        return _local(booking.start_at)

    @admin.display(description=gettext_lazy("Ends"))
    def ends(self, booking: Booking) -> str:
        return _local(booking.end_at)

    @admin.display(description=gettext_lazy("Created by run"))
    def created_by_run(self, booking: Booking) -> str:
        """The run's story (the admins' run detail screen), by URL name: no runtime import."""
        if not booking.run_id:
            return "—"
        return format_html(
            '<a href="{}">{}</a>', reverse("ops:run", args=[booking.run_id]), booking.run_id
        )

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return Role.ADMIN in user_roles(user=admin_user(request))

    @admin.action(description=gettext_lazy("Cancel selected bookings"), permissions=["cancel"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Booking]) -> None:
        """Cancel through the runtime (cancel_booking), as the API, MCP and My bookings do: each
        leaves an Action, its trace, verification and the audit log's row. An admin's cancel of
        another employee's booking is HIGH and waits for an approver other than the admin
        (README, "Approvals"); one refusal does not undo the others."""
        done: list[str] = []
        waiting: list[str] = []
        skipped: list[str] = []
        for code, status in queryset.values_list("code", "status"):
            if status == BookingStatus.CANCELLED:
                skipped.append(code)
                continue
            try:
                outcome = services.booking_cancel_request(
                    user=admin_user(request), booking_code=code, idempotency_key=uuid.uuid4().hex
                )
            except BookingError as exc:
                self.message_user(request, f"{code}: {exc.display_message}", messages.ERROR)
                continue
            (waiting if outcome.kind == "pending" else done).append(code)
        if done:
            self.message_user(
                request,
                ngettext("Cancelled %(codes)s.", "Cancelled %(codes)s.", len(done))
                % {"codes": ", ".join(done)},
                messages.SUCCESS,
            )
        if waiting:
            self.message_user(
                request,
                gettext("Waiting for another approver: %(codes)s.") % {"codes": ", ".join(waiting)},
                messages.INFO,
            )
        if skipped:
            self.message_user(
                request,
                gettext("Already cancelled: %(codes)s.") % {"codes": ", ".join(skipped)},
                messages.WARNING,
            )
