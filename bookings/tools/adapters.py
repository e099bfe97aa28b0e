"""The adapter side of the write tools (seed 002): what happened under a key, does a receipt
still hold, how to undo it, how risky a call is, and how to tell the person."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db import OperationalError
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone
from django.utils.translation import gettext_noop

from accounts.models import Role
from accounts.selectors import user_roles
from agentops.contract import (
    CallContext,
    Compensation,
    Message,
    ReceiptLookup,
    ReceiptStatus,
    Risk,
    SideEffect,
    Verification,
)
from bookings import selectors
from bookings.assistant import replies
from bookings.models import Booking, BookingStatus
from bookings.tools.handlers import booking_out, change_out
from bookings.tools.schemas import (
    BookingOut,
    BookingRef,
    ChangeBookingInput,
    ChangeBookingOutput,
    ReserveRoomInput,
)

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


def reserve_policy_facts(args: ReserveRoomInput) -> dict[str, Any]:
    """The room facts reserve_room's risk and write depend on, as an approval binds them."""
    return {"room": args.room_id, "facts": selectors.room_facts(code=args.room_id)}


def change_policy_facts(args: ChangeBookingInput) -> dict[str, Any]:
    """The target room's facts (the booking's own room when it stays) and the booking's owner."""
    code = args.room_id or selectors.booking_room_code(code=args.booking_id)
    owner = (
        Booking.objects.filter(code=args.booking_id).values_list("requester_id", "status").first()
    )
    return {
        "room": code,
        "facts": selectors.room_facts(code=code) if code else None,
        "booking": list(owner) if owner else None,
    }


def cancel_policy_facts(args: BookingRef) -> dict[str, Any]:
    """Whose booking it is and whether it still stands: what cancel_booking's risk read."""
    owner = (
        Booking.objects.filter(code=args.booking_id).values_list("requester_id", "status").first()
    )
    return {"booking": list(owner) if owner else None}


class _Starts(Protocol):
    start_at: datetime


def starts_at(args: _Starts) -> datetime:
    """When a booking (a series: its first meeting) starts: its approval is due before then."""
    return args.start_at


def reserve_environment_version(args: ReserveRoomInput) -> int | None:
    """The version of the window the reservation acts on (selectors.room_window_version): an
    approval of it outlives bookings on other days of the room."""
    return selectors.room_window_version(code=args.room_id, windows=[(args.start_at, args.end_at)])


# The booking policy's rules, each with its reason; the runtime records its policy version.
LONG_BOOKING_HOURS = 4
LONG_BOOKING = timedelta(hours=LONG_BOOKING_HOURS)


def reserve_risk(ctx: CallContext, args: ReserveRoomInput) -> Risk:
    facts = selectors.room_policy_facts(code=args.room_id)
    reasons: list[Message] = []
    if facts is not None:
        requires_approval, department = facts
        if requires_approval:
            reasons.append(
                Message(
                    gettext_noop("%(room)s is a premium room that needs approval"),
                    {"room": args.room_id},
                )
            )
        dept = getattr(ctx.user, "department", "")
        if dept and department != dept:
            reasons.append(
                Message(
                    gettext_noop("%(room)s belongs to %(department)s, not %(own)s"),
                    {
                        "room": args.room_id,
                        "department": {"department": department},
                        "own": {"department": dept},
                    },
                )
            )
    if args.end_at - args.start_at > LONG_BOOKING:
        hours = (args.end_at - args.start_at).total_seconds() / 3600
        reasons.append(
            Message(
                gettext_noop("a booking of %(hours)s hours, longer than %(limit)s"),
                {"hours": f"{hours:g}", "limit": LONG_BOOKING_HOURS},
            )
        )
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
        return Risk(SideEffect.HIGH, (Message(gettext_noop("cancels another employee's booking")),))
    return Risk(SideEffect.MEDIUM)


# --- change_booking ---------------------------------------------------------------------------


def change_lookup_receipt(key: str) -> ReceiptLookup:
    """What happened to the change made under ``key``: its BookingChange row (found), none once
    any in-flight change of the key has ended (absent), or unknown when the lookup failed."""
    try:
        change = selectors.booking_lookup_change(idempotency_key=key)
    except OperationalError as exc:
        return ReceiptLookup(ReceiptStatus.UNKNOWN, detail=f"lookup failed: {exc}"[:200])
    if change is None:
        return ReceiptLookup(ReceiptStatus.ABSENT, detail="no booking was changed under this key")
    data = change_out(change, change.booking) | {"replayed": False}
    return ReceiptLookup(
        ReceiptStatus.FOUND, ChangeBookingOutput.model_validate(data).model_dump(mode="json")
    )


def change_verify(receipt: dict[str, Any], ctx: CallContext) -> Verification:
    """Does the booking hold what the change made of it: confirmed, same code, room and time?"""
    change = (
        selectors.booking_lookup_change(idempotency_key=ctx.idempotency_key)
        if ctx.idempotency_key
        else None
    )
    if change is None or change.booking.code != receipt.get("booking_id"):
        return Verification(False, "no change of this booking under this key")
    booking = Booking.objects.select_related("room").get(pk=change.booking_id)
    if booking.status != BookingStatus.CONFIRMED:
        return Verification(False, f"{booking.code} is {booking.status}")
    if booking.room.code != receipt.get("room_id") or booking.during != change.to_during:
        return Verification(False, f"{booking.code} is no longer where the change put it")
    return Verification(True, f"{booking.code} now in {booking.room.code}")


def change_environment_version(args: ChangeBookingInput) -> int | None:
    """The version of the window the booking moves into, in the target room (its own room when
    it stays), the booking itself counted as booking_change counts it
    (selectors.room_window_version)."""
    booking = (
        Booking.objects.filter(code=args.booking_id)
        .select_related("room")
        .only("room__code", "during")
        .first()
    )
    if booking is None:
        return None
    code = args.room_id or booking.room.code
    window = (args.start_at or booking.during.lower, args.end_at or booking.during.upper)
    return selectors.room_window_version(code=code, windows=[window])


def change_risk(ctx: CallContext, args: ChangeBookingInput) -> Risk:
    """As reserve_room's risk for the new room and window when the schedule moves (a move into
    a premium or another department's room, a long booking), and HIGH for an admin changing
    another employee's booking. Someone else's booking, for anyone else, reads as not_found in
    the handler: no risk is claimed for it (it would reveal it)."""
    booking = (
        Booking.objects.select_related("room")
        .filter(code=args.booking_id)
        .only("requester_id", "during", "room__code")
        .first()
    )
    if booking is None:
        return Risk(SideEffect.MEDIUM)
    reasons: list[Message | str] = []
    if booking.requester_id != ctx.user.pk:
        if Role.ADMIN not in user_roles(user=ctx.user):
            return Risk(SideEffect.MEDIUM)
        reasons.append("changes another employee's booking")
    room = args.room_id or booking.room.code
    start = args.start_at or booking.during.lower
    end = args.end_at or booking.during.upper
    if (room, start, end) != (booking.room.code, booking.during.lower, booking.during.upper):
        moved = reserve_risk(
            ctx,
            ReserveRoomInput.model_construct(
                room_id=room, start_at=start, end_at=end, expected_version=args.expected_version
            ),
        )
        reasons.extend(moved.reasons)
    return Risk(SideEffect.HIGH if reasons else SideEffect.MEDIUM, tuple(reasons))


def change_summarize(receipt: dict[str, Any], language: str) -> str:
    return replies.moved(receipt, language)


# --- what an approver reads: the call in words, and what stands in its way now ----------------

BOOKING_ROLES = frozenset({Role.EMPLOYEE, Role.APPROVER, Role.ADMIN})
RESERVE_NOT_DONE = Message(gettext_noop("Nothing was booked."))
CANCEL_NOT_DONE = Message(gettext_noop("The booking was not cancelled."))
CHANGE_NOT_DONE = Message(gettext_noop("Nothing was changed; the booking is as it was."))


def _span(start: Any, end: Any) -> dict[str, list[str]]:
    return {"span": [start.isoformat(), end.isoformat()]}


def _person(user: Any) -> str:
    return (user.get_full_name() or user.get_username()) if user is not None else ""


def reserve_describe(ctx: CallContext, args: ReserveRoomInput) -> Message:
    room = selectors.room_state(code=args.room_id)
    attendees = args.attendees or ctx.delegation.attendees
    params = {
        "room": args.room_id,
        "room_name": room.name if room is not None else args.room_id,
        "when": _span(args.start_at, args.end_at),
    }
    if attendees:
        return Message(
            gettext_noop("Book %(room_name)s (%(room)s), %(when)s, for %(attendees)s people"),
            params | {"attendees": attendees},
        )
    return Message(gettext_noop("Book %(room_name)s (%(room)s), %(when)s"), params)


def _requester_problems(ctx: CallContext) -> list[Message]:
    user = ctx.user
    if not user.is_active or not (user_roles(user=user) & BOOKING_ROLES):
        return [
            Message(gettext_noop("%(person)s may no longer book rooms."), {"person": _person(user)})
        ]
    return []


def reserve_recheck(ctx: CallContext, args: ReserveRoomInput) -> tuple[Message, ...]:
    """What would make this reservation fail if it ran now (empty: it can still succeed)."""
    problems = _requester_problems(ctx)
    room = selectors.room_recheck(
        code=args.room_id,
        start_at=args.start_at,
        end_at=args.end_at,
        key=ctx.idempotency_key or "-",
        expected=args.expected_version,
    )
    if room is None:
        return (
            *problems,
            Message(gettext_noop("%(room)s no longer exists."), {"room": args.room_id}),
        )
    attendees = args.attendees or ctx.delegation.attendees or 0
    if not room.bookable:
        problems.append(
            Message(gettext_noop("%(room)s can no longer be booked."), {"room": room.code})
        )
    if attendees > room.capacity:
        problems.append(
            Message(
                gettext_noop("%(room)s now holds %(capacity)s people, fewer than %(attendees)s."),
                {"room": room.code, "capacity": room.capacity, "attendees": attendees},
            )
        )
    if args.start_at <= timezone.now():
        problems.append(Message(gettext_noop("The time has already begun or passed.")))
    if room.taken is not None:
        problems.append(
            Message(
                gettext_noop("%(room)s was taken meanwhile: another booking holds %(when)s."),
                {"room": room.code, "when": _span(*room.taken)},
            )
        )
    elif args.expected_version > room.schedule_version or room.moved:
        # What booking_reserve calls not fresh: the window's schedule moved after the version
        # the request carries (a booking in it was made or cancelled since).
        problems.append(
            Message(
                gettext_noop(
                    "%(room)s's schedule for that time changed after the request was made: "
                    "the booking would be refused as out of date."
                ),
                {"room": room.code},
            )
        )
    return tuple(problems)


def _booking_problems(
    ctx: CallContext, booking: Booking | None, code: str, *, cancelled: str
) -> list[Message]:
    """A waiting change's or cancel's booking as it is now: gone (that alone), or the
    requester's problems and, when it is no longer confirmed, ``cancelled``."""
    if booking is None:
        return [Message(gettext_noop("%(booking)s no longer exists."), {"booking": code})]
    problems = _requester_problems(ctx)
    if booking.status != BookingStatus.CONFIRMED:
        problems.append(Message(cancelled, {"booking": booking.code}))
    return problems


def change_recheck(ctx: CallContext, args: ChangeBookingInput) -> tuple[Message, ...]:
    """What would make this waiting change fail if it ran now: the booking gone or cancelled
    meanwhile, the requester no longer allowed, the time begun, or the new window taken."""
    booking = Booking.objects.select_related("room").filter(code=args.booking_id).first()
    problems = _booking_problems(
        ctx,
        booking,
        args.booking_id,
        cancelled=gettext_noop("%(booking)s was cancelled meanwhile: there is nothing to change."),
    )
    if booking is None or booking.status != BookingStatus.CONFIRMED:
        return tuple(problems)
    start = args.start_at or booking.during.lower
    end = args.end_at or booking.during.upper
    if start <= timezone.now():
        problems.append(Message(gettext_noop("The time has already begun or passed.")))
    code = args.room_id or booking.room.code
    taken = (
        Booking.objects.filter(
            room__code=code,
            status=BookingStatus.CONFIRMED,
            during__overlap=DateTimeTZRange(start, end, "[)"),
        )
        .exclude(pk=booking.pk)
        .values_list("during", flat=True)
        .first()
    )
    if taken is not None:
        problems.append(
            Message(
                gettext_noop("%(room)s was taken meanwhile: another booking holds %(when)s."),
                {"room": code, "when": _span(taken.lower, taken.upper)},
            )
        )
    return tuple(problems)


def cancel_describe(ctx: CallContext, args: BookingRef) -> Message:
    booking = (
        Booking.objects.filter(code=args.booking_id).select_related("room", "requester").first()
    )
    if booking is None:
        return Message(gettext_noop("Cancel booking %(booking)s"), {"booking": args.booking_id})
    return Message(
        gettext_noop("Cancel %(booking)s: %(room_name)s (%(room)s), %(when)s, booked by %(owner)s"),
        {
            "booking": booking.code,
            "room": booking.room.code,
            "room_name": booking.room.name,
            "when": _span(booking.during.lower, booking.during.upper),
            "owner": _person(booking.requester),
        },
    )


def cancel_recheck(ctx: CallContext, args: BookingRef) -> tuple[Message, ...]:
    booking = Booking.objects.filter(code=args.booking_id).only("status", "requester_id").first()
    problems = _booking_problems(
        ctx,
        booking,
        args.booking_id,
        cancelled=gettext_noop("%(booking)s is already cancelled: there is nothing to cancel."),
    )
    if booking is None:
        return tuple(problems)
    if booking.requester_id != ctx.user.pk and Role.ADMIN not in user_roles(user=ctx.user):
        problems.append(
            Message(
                gettext_noop("%(person)s is no longer an admin and may not cancel this booking."),
                {"person": _person(ctx.user)},
            )
        )
    return tuple(problems)
