from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import ArrayField, DateTimeRangeField, RangeOperators
from django.db import models
from django.db.models import Q
from django.db.models.functions import Cast, Concat
from django.utils.translation import gettext_lazy

from accounts.models import Department


class Room(models.Model):
    code = models.CharField(max_length=16, unique=True)
    name = models.CharField(max_length=100)
    capacity = models.PositiveSmallIntegerField()
    equipment = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    department = models.CharField(max_length=32, choices=Department.choices)
    floor = models.SmallIntegerField(default=1)
    notes = models.TextField(blank=True, help_text="Free text. Untrusted data, never instructions.")
    bookable = models.BooleanField(default=True)
    requires_approval = models.BooleanField(
        default=False, help_text="Premium or paid room: agent bookings need a human approval."
    )
    schedule_version = models.PositiveIntegerField(
        default=0, help_text="Incremented in the same transaction as every schedule write."
    )
    sandbox = models.BooleanField(
        default=False,
        help_text="A drill room: only drill identities see it, and they see nothing else.",
    )
    checkin_required = models.BooleanField(
        default=True,
        db_default=True,
        verbose_name=gettext_lazy("Check-in required"),
        help_text="Bookings not checked in by the grace period are released for others.",
    )

    class Meta:
        verbose_name = gettext_lazy("room")
        verbose_name_plural = gettext_lazy("rooms")
        ordering = ["code"]
        constraints = [
            models.CheckConstraint(condition=Q(capacity__gte=1), name="room_capacity_positive")
        ]

    def __str__(self) -> str:
        return f"{self.code} {self.name}"


class BookingStatus(models.TextChoices):
    CONFIRMED = "confirmed", gettext_lazy("Confirmed")
    CANCELLED = "cancelled", gettext_lazy("Cancelled")


class BookingSeries(models.Model):
    """A recurring meeting: one RFC 5545 rule, its occurrences ordinary bookings (Booking.series).

    Created in one transaction with every occurrence it books (bookings/series.py)."""

    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="booking_series"
    )
    room = models.ForeignKey(Room, on_delete=models.PROTECT, related_name="series")
    rule = models.CharField(
        max_length=200, help_text="RFC 5545 RRULE value, e.g. FREQ=WEEKLY;COUNT=6"
    )
    first_start = models.DateTimeField(help_text="DTSTART: the first occurrence's start.")
    duration = models.DurationField()
    attendees = models.PositiveSmallIntegerField()
    idempotency_key = models.CharField(max_length=200, unique=True)
    run_id = models.CharField(max_length=64, blank=True)
    missed_checkins = models.PositiveSmallIntegerField(
        default=0, help_text="Occurrences released in a row for want of a check-in."
    )
    released_at = models.DateTimeField(
        null=True, blank=True, help_text="When missed check-ins released the rest of the series."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "booking series"

    def __str__(self) -> str:
        return f"S{self.pk}"


class SeriesCancellation(models.Model):
    """The receipt of one cancel_series call: which occurrences it cancelled, under which key."""

    series = models.ForeignKey(
        BookingSeries, on_delete=models.PROTECT, related_name="cancellations"
    )
    idempotency_key = models.CharField(max_length=200, unique=True)
    from_start = models.DateTimeField(
        help_text="Occurrences starting at or after this were cancelled."
    )
    cancelled = ArrayField(models.CharField(max_length=16), default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.idempotency_key


class Booking(models.Model):
    code = models.CharField(
        max_length=16,
        unique=True,
        editable=False,
        db_default=Concat(
            models.Value("B"),
            Cast(
                models.Func(models.Value("bookings_booking_code_seq"), function="nextval"),
                models.CharField(),
            ),
        ),
    )
    room = models.ForeignKey(Room, on_delete=models.PROTECT, related_name="bookings")
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="bookings"
    )
    during = DateTimeRangeField(help_text="Half-open [start, end).")
    attendees = models.PositiveSmallIntegerField()
    title = models.CharField(
        max_length=120,
        blank=True,
        db_default="",  # the reserve's hand-written INSERT names it; older rows read as untitled
        help_text="Meeting title. Untrusted text: shown to its owner and approvers, escaped.",
    )
    status = models.CharField(
        max_length=16, choices=BookingStatus.choices, default=BookingStatus.CONFIRMED
    )
    idempotency_key = models.CharField(max_length=200, unique=True)
    run_id = models.CharField(
        max_length=64, blank=True, help_text="Agent run that created it, if any."
    )
    action_id = models.CharField(max_length=64, blank=True)
    created_version = models.PositiveIntegerField(
        default=0, help_text="The room's schedule version this booking's insert produced."
    )
    cancelled_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The room's schedule version its cancellation produced."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    cancel_key = models.CharField(
        max_length=200,
        blank=True,
        db_default="",  # the reserve's hand-written INSERT does not name it
        help_text="Idempotency key of the call that cancelled it (receipt lookup by key).",
    )
    # The reserve's hand-written INSERT names none of the following: each has a database default.
    series = models.ForeignKey(
        BookingSeries, null=True, blank=True, on_delete=models.PROTECT, related_name="bookings"
    )
    sequence = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="iCalendar SEQUENCE: bumped by every service that changes the booking.",
    )
    checked_in_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(
        null=True, blank=True, help_text="Cancelled because nobody checked in."
    )

    class Meta:
        verbose_name = gettext_lazy("booking")
        verbose_name_plural = gettext_lazy("bookings")
        ordering = ["-created_at"]
        constraints = [
            ExclusionConstraint(
                name="booking_no_overlap",
                expressions=[("room", RangeOperators.EQUAL), ("during", RangeOperators.OVERLAPS)],
                condition=Q(status="confirmed"),
            ),
            models.CheckConstraint(
                condition=Q(attendees__gte=1), name="booking_attendees_positive"
            ),
            models.CheckConstraint(
                condition=Q(during__isempty=False), name="booking_during_not_empty"
            ),
            models.UniqueConstraint(
                fields=["cancel_key"], condition=~Q(cancel_key=""), name="booking_cancel_key_unique"
            ),
            models.CheckConstraint(
                condition=Q(status="confirmed", cancelled_at__isnull=True)
                | Q(status="cancelled", cancelled_at__isnull=False),
                name="booking_cancelled_at_matches_status",
            ),
        ]
        indexes = [models.Index(fields=["requester", "-created_at"])]

    def __str__(self) -> str:
        return self.code

    @property
    def start_at(self) -> datetime:
        return self.during.lower

    @property
    def end_at(self) -> datetime:
        return self.during.upper


class BookingChange(models.Model):
    """One change of a booking (its receipt): what it was and what it became, under the key of
    the call that made it. The booking keeps its code; this row answers "what happened to key K?"."""

    booking = models.ForeignKey(Booking, on_delete=models.PROTECT, related_name="changes")
    idempotency_key = models.CharField(max_length=200, unique=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    from_room = models.ForeignKey(Room, on_delete=models.PROTECT, related_name="+")
    from_during = DateTimeRangeField()
    from_attendees = models.PositiveSmallIntegerField()
    from_title = models.CharField(max_length=120, blank=True)
    to_room = models.ForeignKey(Room, on_delete=models.PROTECT, related_name="+")
    to_during = DateTimeRangeField()
    to_attendees = models.PositiveSmallIntegerField()
    to_title = models.CharField(max_length=120, blank=True)
    run_id = models.CharField(max_length=64, blank=True)
    action_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.booking_id}: {self.idempotency_key}"


class CalendarToken(models.Model):
    """The secret of a person's calendar feed URL. Resetting it makes the old URL answer 404.

    Kept as given (the person copies the URL from My bookings again at any time); it grants
    only reading that person's own bookings."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="calendar_token"
    )
    token = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"calendar token of {self.user_id}"
