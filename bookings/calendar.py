"""Bookings as iCalendar (RFC 5545, the ``icalendar`` library): a person's feed at a secret
URL, and one booking's .ics. A calendar that subscribed sees changes and cancellations: the UID
stays, SEQUENCE grows with every change (Booking.sequence), a cancelled booking is
STATUS:CANCELLED."""

from __future__ import annotations

import secrets
from datetime import UTC, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from icalendar import Calendar, Event

from accounts.models import User
from bookings.models import Booking, BookingStatus, CalendarToken

FEED_PAST_DAYS = 30  # how far back a feed goes: a calendar keeps what it already had
PRODID = "-//Rooms//Meeting-room bookings//EN"


def calendar_token_get(*, user: User) -> CalendarToken:
    """The person's feed token, made on first use."""
    token = CalendarToken.objects.filter(user=user).first()
    return token or calendar_token_reset(user=user)


@transaction.atomic
def calendar_token_reset(*, user: User) -> CalendarToken:
    """A new secret for the person's feed: the old URL stops working at once."""
    token, _ = CalendarToken.objects.select_for_update().get_or_create(
        user=user, defaults={"token": secrets.token_urlsafe(32)}
    )
    token.token = secrets.token_urlsafe(32)
    token.save(update_fields=["token", "created_at"])
    return token


def calendar_feed_user(*, token: str) -> User | None:
    """Whose feed this secret opens (None: no one's; an inactive person's feed is closed)."""
    found = CalendarToken.objects.select_related("user").filter(token=token).first()
    if found is None or not secrets.compare_digest(found.token, token) or not found.user.is_active:
        return None
    return found.user


def _uid(booking: Booking) -> str:
    return f"{booking.code}@{settings.CALENDAR_UID_DOMAIN}"


def _event(booking: Booking) -> Event:
    event = Event()
    event.add("uid", _uid(booking))
    event.add("sequence", booking.sequence)
    event.add("dtstamp", timezone.now().astimezone(UTC))
    event.add("dtstart", booking.start_at.astimezone(UTC))
    event.add("dtend", booking.end_at.astimezone(UTC))
    event.add("summary", f"{booking.room.code} {booking.room.name} ({booking.code})")
    event.add("location", f"{booking.room.name} ({booking.room.code})")
    cancelled = booking.status == BookingStatus.CANCELLED
    event.add("status", "CANCELLED" if cancelled else "CONFIRMED")
    if booking.series_id is not None:
        event.add("categories", [f"series-{booking.series_id}"])
    return event


def _calendar(bookings: list[Booking], *, name: str) -> bytes:
    cal = Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    cal.add("calscale", "GREGORIAN")
    cal.add("method", "PUBLISH")
    cal.add("x-wr-calname", name)
    for booking in bookings:
        cal.add_component(_event(booking))
    return cal.to_ical()


def calendar_feed(*, user: User, name: str) -> bytes:
    """The person's bookings from FEED_PAST_DAYS ago on, cancelled ones included (so that a
    subscribed calendar removes them)."""
    since = timezone.now() - timedelta(days=FEED_PAST_DAYS)
    bookings = list(
        Booking.objects.select_related("room")
        .filter(requester=user, during__endswith__gte=since)
        .order_by("during")
    )
    return _calendar(bookings, name=name)


def calendar_booking(*, booking: Booking, name: str) -> bytes:
    return _calendar([booking], name=name)
