"""What My bookings shows beside a booking: can it be checked in now."""

from __future__ import annotations

from django import template
from django.utils import timezone

from bookings.checkin import checkin_open
from bookings.models import Booking

register = template.Library()


@register.filter
def can_check_in(booking: Booking) -> bool:
    return checkin_open(booking, now=timezone.now())
