"""The adapter side of the write tools (seed 002): what happened under a key, does a receipt
still hold, how to undo it, how risky a call is, and how to tell the person."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import OperationalError

from accounts.models import Role
from accounts.selectors import user_roles
from agentops.contract import (
    CallContext,
    Compensation,
    ReceiptLookup,
    ReceiptStatus,
    Risk,
    SideEffect,
    Verification,
)
from bookings import selectors
from bookings.assistant import replies
from bookings.models import Booking, BookingStatus
from bookings.tools.handlers import booking_out
from bookings.tools.schemas import BookingOut, BookingRef, ReserveRoomInput

# --- reconciliation side of the write tools ---------------------------------------------------


def _receipt_of(booking: Booking) -> dict[str, Any]:
    return BookingOut.model_validate(booking_out(booking)).model_dump(mode="json")


def reserve_lookup_receipt(key: str) -> ReceiptLookup:
    booking = selectors.booking_lookup_receipt(idempotency_key=key)
    if booking is None:
        return ReceiptLookup(ReceiptStatus.ABSENT, detail="no booking carries this key")
    return ReceiptLookup(ReceiptStatus.FOUND, _receipt_of(booking) | {"replayed": False})


def reserve_verify(receipt: dict[str, Any], ctx: CallContext) -> Verification:
    """Does the booking still hold now, for this subject and within the delegation?"""
    booking = (
        selectors.booking_get_by_key(idempotency_key=ctx.idempotency_key)
        if ctx.idempotency_key
        else None
    )
    if booking is None or booking.code != receipt.get("booking_id"):
        return Verification(False, "no booking with this receipt's code and key")
    if booking.status != BookingStatus.CONFIRMED:
        return Verification(False, f"{booking.code} is {booking.status}")
    if booking.requester_id != ctx.user.pk:
        return Verification(False, f"{booking.code} belongs to someone else")
    if booking.room.code != receipt.get("room_id"):
        return Verification(False, "room differs from the receipt")
    delegation = ctx.delegation
    if delegation.window is not None:
        lo, hi = delegation.window
        if booking.during.lower < lo or booking.during.upper > hi:
            return Verification(False, "booking lies outside the delegated time window")
    if delegation.attendees and booking.attendees != delegation.attendees:
        return Verification(False, "attendees differ from the delegation")
    allowed = delegation.allowed_resources
    if allowed and booking.room.code not in allowed:
        return Verification(False, f"{booking.room.code} is not the room the user asked for")
    return Verification(True, f"{booking.code} confirmed in {booking.room.code}")


# A confirmed reservation is undone by cancelling it (a saga's compensation): the runtime
# calls cancel_booking through its recorder, under the key "<reserve key>:compensate".
RESERVE_COMPENSATION = Compensation(
    tool="cancel_booking",
    arguments=lambda receipt: {"booking_id": receipt["booking_id"]},
    label=lambda receipt: str(receipt.get("booking_id", "")),
)


def cancel_lookup_receipt(key: str) -> ReceiptLookup:
    """What happened to the cancel made under ``key``: the booking that carries it as its
    cancel key (found), none once any in-flight cancel of the key has ended (absent: running
    it again is safe), or unknown when the lookup could not get that answer."""
    try:
        booking = selectors.booking_lookup_cancel(idempotency_key=key)
    except OperationalError as exc:
        return ReceiptLookup(ReceiptStatus.UNKNOWN, detail=f"lookup failed: {exc}"[:200])
    if booking is None:
        return ReceiptLookup(ReceiptStatus.ABSENT, detail="no booking was cancelled under this key")
    return ReceiptLookup(ReceiptStatus.FOUND, _receipt_of(booking))


def cancel_verify(receipt: dict[str, Any], ctx: CallContext) -> Verification:
    booking = Booking.objects.filter(code=receipt.get("booking_id")).first()
    if booking is None:
        return Verification(False, "booking not found")
    return Verification(
        booking.status == BookingStatus.CANCELLED, f"{booking.code} is {booking.status}"
    )


def reserve_summarize(receipt: dict[str, Any], language: str) -> str:
    return replies.booked(receipt, language)


def cancel_summarize(receipt: dict[str, Any], language: str) -> str:
    return replies.cancelled(receipt, language)


def starts_at(args: ReserveRoomInput) -> datetime:
    """When a booking (a series: its first meeting) starts: its approval is due before then."""
    return args.start_at


def reserve_environment_version(args: ReserveRoomInput) -> int | None:
    return selectors.room_schedule_version(code=args.room_id)


# The booking policy's rules, each with its reason; the runtime records its policy version.
LONG_BOOKING_HOURS = 4
LONG_BOOKING = timedelta(hours=LONG_BOOKING_HOURS)


def reserve_risk(ctx: CallContext, args: ReserveRoomInput) -> Risk:
    facts = selectors.room_policy_facts(code=args.room_id)
    reasons = []
    if facts is not None:
        requires_approval, department = facts
        if requires_approval:
            reasons.append(f"{args.room_id} is a premium room that needs approval")
        dept = getattr(ctx.user, "department", "")
        if dept and department != dept:
            reasons.append(f"{args.room_id} belongs to {department}, not {dept}")
    if args.end_at - args.start_at > LONG_BOOKING:
        hours = (args.end_at - args.start_at).total_seconds() / 3600
        reasons.append(f"a booking of {hours:g} hours, longer than {LONG_BOOKING_HOURS}")
    return Risk(SideEffect.HIGH if reasons else SideEffect.MEDIUM, tuple(reasons))


def cancel_risk(ctx: CallContext, args: BookingRef) -> Risk:
    """An admin cancelling someone else's booking needs an approval. For anyone else that
    booking does not exist (the handler answers booking_not_found, as for an unknown code):
    saying it "needs approval" would reveal it."""
    booking = Booking.objects.filter(code=args.booking_id).only("requester_id").first()
    if (
        booking is not None
        and booking.requester_id != ctx.user.pk
        and Role.ADMIN in user_roles(user=ctx.user)
    ):
        return Risk(SideEffect.HIGH, ("cancels another employee's booking",))
    return Risk(SideEffect.MEDIUM)
