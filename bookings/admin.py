from __future__ import annotations

from django.contrib import admin

from bookings.models import Booking, Room


@admin.register(Room)
class RoomAdmin(admin.ModelAdmin):
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
    list_filter = ("department", "floor", "bookable", "requires_approval")
    readonly_fields = ("schedule_version",)
    search_fields = ("code", "name")


@admin.register(Booking)
class BookingAdmin(admin.ModelAdmin):
    list_display = ("code", "room", "requester", "during", "attendees", "status", "created_at")
    list_filter = ("status", "room")
    search_fields = ("code", "idempotency_key", "requester__username")
    readonly_fields = (
        "code",
        "idempotency_key",
        "run_id",
        "action_id",
        "created_at",
        "cancelled_at",
        "cancelled_by",
    )
    list_select_related = ("room", "requester")
