"""Check-in and the release of bookings nobody checked in to.

A booking of a room that requires check-in (Room.checkin_required) can be checked in from
BOOKING_CHECKIN_OPEN_MINUTES before its start to BOOKING_CHECKIN_GRACE_MINUTES after it. One
not checked in by then is released (cancelled, ``released_at`` set) by the beat task, with an
audit row and a notice to its owner. A series released BOOKING_SERIES_MISSED_CHECKINS times in
a row is released from then on. Every function takes ``now`` so tests pass a clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext_noop

from accounts.models import AuditAction, User
from accounts.services import audit_record
from bookings.errors import BookingError
from bookings.live import bookings_changed
from bookings.locks import bookings_lock, cancel_stamp
from bookings.models import Booking, BookingSeries, BookingStatus
from bookings.notices import Notice, notify

RELEASE_BATCH = 200


def _open_minutes() -> timedelta:
    return timedelta(minutes=settings.BOOKING_CHECKIN_OPEN_MINUTES)


def _grace() -> timedelta:
    return timedelta(minutes=settings.BOOKING_CHECKIN_GRACE_MINUTES)


def checkin_window(booking: Booking) -> tuple[datetime, datetime]:
    """[opens, closes) of the booking's check-in."""
    return booking.start_at - _open_minutes(), booking.start_at + _grace()


def checkin_open(booking: Booking, *, now: datetime) -> bool:
    """Whether the person can check in now (for the screens' button)."""
    opens, closes = checkin_window(booking)
    return (
        booking.status == BookingStatus.CONFIRMED
        and booking.checked_in_at is None
        and booking.room.checkin_required
        and opens <= now < closes
    )


@transaction.atomic
def booking_check_in(*, user: User, booking_code: str, now: datetime | None = None) -> Booking:
    """Check in to one's own confirmed booking inside its window. Checking in twice returns
    the booking unchanged. A checked-in occurrence of a series resets its missed count."""
    now = now or timezone.now()
    booking = (
        Booking.objects.select_for_update(of=("self",))
        .select_related("room")
        .filter(code=booking_code, requester=user)
        .first()
    )
    if booking is None:
        raise BookingError(
            "not_found",
            "booking_not_found",
            gettext_noop("There is no booking %(code)s."),
            params={"code": booking_code},
        )
    if booking.checked_in_at is not None:
        return booking
    if booking.status != BookingStatus.CONFIRMED:
        raise BookingError(
            "invalid_input",
            "checkin_cancelled",
            gettext_noop("%(code)s is cancelled: there is nothing to check in to."),
            params={"code": booking.code},
        )
    if not booking.room.checkin_required:
        raise BookingError(
            "invalid_input",
            "checkin_not_needed",
            gettext_noop("%(room)s needs no check-in."),
            params={"room": booking.room.code},
        )
    opens, closes = checkin_window(booking)
    if now < opens:
        raise BookingError(
            "invalid_input",
            "checkin_too_early",
            gettext_noop("Check-in opens at %(time)s."),
            gettext_noop("Come back %(minutes)d minutes before the start."),
            params={
                "time": date_format(timezone.localtime(opens), "TIME_FORMAT"),
                "minutes": settings.BOOKING_CHECKIN_OPEN_MINUTES,
            },
        )
    if now >= closes:
        raise BookingError(
            "invalid_input",
            "checkin_too_late",
            gettext_noop("Check-in closed at %(time)s."),
            params={"time": date_format(timezone.localtime(closes), "TIME_FORMAT")},
        )
    booking.checked_in_at = now
    booking.save(update_fields=["checked_in_at"])
    if booking.series_id is not None:
        BookingSeries.objects.filter(pk=booking.series_id).update(missed_checkins=0)
    return booking


@dataclass(frozen=True)
class Released:
    codes: list[str]
    series_released: list[int]


def bookings_release_no_shows(*, now: datetime | None = None) -> Released:
    """Release every confirmed booking whose check-in closed without one, each in its own
    transaction (one that fails leaves the others released)."""
    now = now or timezone.now()
    due = list(
        Booking.objects.filter(
            status=BookingStatus.CONFIRMED,
            checked_in_at__isnull=True,
            room__checkin_required=True,
            during__startswith__lte=now - _grace(),
        )
        .order_by("during")
        .values_list("pk", flat=True)[:RELEASE_BATCH]
    )
    codes, series = [], []
    for pk in due:
        done = _release_one(pk, now=now)
        if done is not None:
            codes.extend(done[0])
            if done[1] is not None:
                series.append(done[1])
    return Released(codes=codes, series_released=series)


@transaction.atomic
def _release_one(pk: int, *, now: datetime) -> tuple[list[str], int | None] | None:
    """Lock the rooms, then the bookings (every schedule writer's order, bookings.locks);
    re-check; release. A meeting of the series moved to another room is released there."""
    found = Booking.objects.filter(pk=pk).values_list("series_id", "during").first()
    if found is None:  # never: bookings are not deleted
        return None
    # The series' later meetings too, in one lock order: releasing the series may take them.
    later = (
        Booking.objects.filter(
            series_id=found[0],
            status=BookingStatus.CONFIRMED,
            during__startswith__gt=found[1].lower,
        ).values_list("pk", flat=True)
        if found[0] is not None
        else []
    )
    _, locked = bookings_lock(pks=[pk, *later])
    booking = locked.pop(pk)
    if (
        booking.status != BookingStatus.CONFIRMED
        or booking.checked_in_at is not None
        or booking.start_at + _grace() > now
    ):
        return None  # checked in or cancelled meanwhile
    released = [booking]
    series_id = None
    if booking.series_id is not None:
        series = BookingSeries.objects.select_for_update().get(pk=booking.series_id)
        series.missed_checkins += 1
        fields = ["missed_checkins"]
        if (
            series.missed_checkins >= settings.BOOKING_SERIES_MISSED_CHECKINS
            and series.released_at is None
        ):
            series.released_at = now
            fields.append("released_at")
            series_id = series.pk
            released += sorted(
                (b for b in locked.values() if b.status == BookingStatus.CONFIRMED),
                key=lambda b: b.start_at,
            )
        series.save(update_fields=fields)
    cancel_stamp(released)
    for item in released:
        item.status = BookingStatus.CANCELLED
        item.cancelled_at = now
        item.released_at = now
        item.sequence += 1
    Booking.objects.bulk_update(
        released, ["status", "cancelled_at", "released_at", "cancelled_version", "sequence"]
    )
    bookings_changed(released)  # open day views and room weeks re-read after the commit
    owner = booking.requester
    audit_record(
        actor=owner,
        action=AuditAction.BOOKING_RELEASED,
        target=f"booking:{booking.code}",
        detail={
            "by": "check-in sweeper",
            "released": [b.code for b in released],
            "series": series_id,
            "missed_in_a_row": None if booking.series_id is None else series.missed_checkins,
        },
    )
    start = timezone.localtime(booking.start_at)
    what = f"{booking.room.code} {date_format(start, 'SHORT_DATETIME_FORMAT')} ({booking.code})"
    notify(user=owner, notice=Notice.RELEASED, what=what)
    return [b.code for b in released], series_id
