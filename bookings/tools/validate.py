"""The booking rules no approval can change, checked by the gate before an approver is asked
(ToolSpec.validate): the window (start after now, end after start, within the horizon, at most
BOOKING_MAX_HOURS), the number of people, a series' repeat rule. The same rules the services
apply when they write (bookings.rules, bookings.recurrence): here they only come earlier."""

from __future__ import annotations

from django.utils import timezone
from django.utils.translation import gettext_noop

from agentops.contract import CallContext
from bookings import rules
from bookings.errors import BookingError
from bookings.models import Booking, BookingStatus
from bookings.recurrence import occurrences
from bookings.tools.handlers import _domain_errors
from bookings.tools.schemas import ChangeBookingInput, ReserveRoomInput, ReserveSeriesInput


@_domain_errors
def reserve_validate(ctx: CallContext, args: ReserveRoomInput) -> None:
    rules.check_window(args.start_at, args.end_at, now=timezone.now())


@_domain_errors
def change_validate(ctx: CallContext, args: ChangeBookingInput) -> None:
    """One's own booking must still be confirmed (a cancelled one cannot be changed, whatever
    an approver says), and the new window, completed from the booking as it is (a change may
    name only one end), must keep the rules. Someone else's or an unknown booking is the
    handler's to refuse (it must not be told apart here)."""
    found = (
        Booking.objects.filter(code=args.booking_id)
        .values_list("requester_id", "status", "during")
        .first()
    )
    if found is None or found[0] != ctx.user.pk:
        return
    _owner, status, during = found
    if status != BookingStatus.CONFIRMED:
        raise BookingError(
            "conflict",
            "booking_not_confirmed",
            gettext_noop("%(code)s is cancelled; a cancelled booking cannot be changed."),
            gettext_noop("Book a new room instead."),
            params={"code": args.booking_id},
        )
    if args.start_at is None and args.end_at is None:
        return
    start = args.start_at or during.lower
    end = args.end_at or during.upper
    rules.check_window(start, end, now=timezone.now())


@_domain_errors
def series_validate(ctx: CallContext, args: ReserveSeriesInput) -> None:
    rules.check_window(args.start_at, args.end_at, now=timezone.now())
    occurrences(rule=args.rrule, first_start=args.start_at, duration=args.end_at - args.start_at)
