"""The recurring-booking tools' handlers and adapter side: reserve_series (one governed write
for a whole series) and cancel_series (this and the following occurrences, or all)."""

from __future__ import annotations

from typing import Any

from django.db import OperationalError, connection, transaction
from django.utils import timezone, translation
from django.utils.translation import gettext, gettext_noop, ngettext

from agentops.contract import (
    CallContext,
    Compensation,
    Message,
    ReceiptLookup,
    ReceiptStatus,
    Risk,
    SideEffect,
    Verification,
    success,
)
from bookings import selectors
from bookings import series as series_service
from bookings.errors import BookingError
from bookings.models import BookingSeries, BookingStatus, SeriesCancellation
from bookings.recurrence import occurrences
from bookings.tools.adapters import LONG_BOOKING, LONG_BOOKING_HOURS
from bookings.tools.handlers import _domain_errors
from bookings.tools.schemas import (
    CancelSeriesInput,
    CancelSeriesOutput,
    ReserveSeriesInput,
    ReserveSeriesOutput,
)

LOOKUP_WAIT_MS = 2000


def _series_receipt(
    series: BookingSeries, *, skipped: list | None = None, replayed: bool = False
) -> dict[str, Any]:
    data = {
        "series_id": series.pk,
        "room_id": series.room.code,
        "rrule": series.rule,
        "booked": [
            {
                "booking_id": b.code,
                "start_at": b.start_at,
                "end_at": b.end_at,
                "status": b.status,
            }
            for b in series.bookings.order_by("during")
        ],
        "skipped": [{"start_at": o.start_at, "end_at": o.end_at} for o in skipped or []],
        "replayed": replayed,
    }
    return ReserveSeriesOutput.model_validate(data).model_dump(mode="json")


@_domain_errors
def reserve_series(ctx: CallContext, args: ReserveSeriesInput) -> dict[str, Any]:
    result = series_service.series_reserve(
        user=ctx.user,
        room_code=args.room_id,
        start_at=args.start_at,
        end_at=args.end_at,
        rule=args.rrule,
        attendees=args.attendees,
        equipment=args.equipment,
        mode=series_service.SeriesMode(args.mode),
        idempotency_key=ctx.idempotency_key,
        run_id=ctx.run_id,
        action_id=ctx.action_id,
    )
    return success(_series_receipt(result.series, skipped=result.skipped, replayed=result.replayed))


@_domain_errors
def cancel_series(ctx: CallContext, args: CancelSeriesInput) -> dict[str, Any]:
    result = series_service.series_cancel(
        user=ctx.user,
        series_id=args.series_id,
        from_booking=args.from_booking_id,
        idempotency_key=ctx.idempotency_key,
    )
    data = {
        "series_id": result.series.pk,
        "room_id": result.series.room.code,
        "cancelled": result.cancelled,
        "replayed": result.replayed,
    }
    return success(CancelSeriesOutput.model_validate(data).model_dump(mode="json"))


# --- adapters ---------------------------------------------------------------------------------


def _after_key(key: str) -> None:
    """Wait for any in-flight write of ``key`` (the services hold its advisory lock until
    commit), bounded: a write that holds it longer is stuck, and "unknown" is the honest answer."""
    cursor = connection.cursor()
    cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{LOOKUP_WAIT_MS}ms"])
    cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])
    cursor.close()


def reserve_series_lookup_receipt(key: str) -> ReceiptLookup:
    try:
        with transaction.atomic():
            _after_key(key)
            series = (
                BookingSeries.objects.select_related("room").filter(idempotency_key=key).first()
            )
            if series is None:
                return ReceiptLookup(ReceiptStatus.ABSENT, detail="no series carries this key")
            return ReceiptLookup(ReceiptStatus.FOUND, _series_receipt(series))
    except OperationalError as exc:
        return ReceiptLookup(ReceiptStatus.UNKNOWN, detail=f"lookup failed: {exc}"[:200])


def reserve_series_verify(receipt: dict[str, Any], ctx: CallContext) -> Verification:
    """The series under this call's key is the receipt's, the subject's, and every occurrence
    the receipt lists as booked is confirmed in the database now."""
    series = BookingSeries.objects.filter(idempotency_key=ctx.idempotency_key).first()
    if series is None or series.pk != receipt.get("series_id"):
        return Verification(False, "no series with this receipt's id and key")
    if series.requester_id != ctx.user.pk:
        return Verification(False, "the series belongs to someone else")
    listed = {b["booking_id"] for b in receipt.get("booked", []) if b["status"] == "confirmed"}
    confirmed = set(
        series.bookings.filter(status=BookingStatus.CONFIRMED).values_list("code", flat=True)
    )
    if not listed or not listed <= confirmed:
        return Verification(False, f"occurrences not confirmed: {sorted(listed - confirmed)}")
    return Verification(True, f"series {series.pk}: {len(listed)} occurrences confirmed")


# A booked series is undone by cancelling all of it, under "<reserve key>:compensate".
RESERVE_SERIES_COMPENSATION = Compensation(
    tool="cancel_series",
    arguments=lambda receipt: {"series_id": receipt["series_id"]},
    label=lambda receipt: ", ".join(b["booking_id"] for b in receipt.get("booked", [])),
)


def reserve_series_risk(ctx: CallContext, args: ReserveSeriesInput) -> Risk:
    """The booking policy's room rules, as reserve_room applies them to one booking: a series
    that needs approval needs one approval, its intent listing the occurrences."""
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
    if reasons:
        reasons.append(_occurrence_list(args))
    return Risk(SideEffect.HIGH if reasons else SideEffect.MEDIUM, tuple(reasons))


def _occurrence_list(args: ReserveSeriesInput) -> str:
    """The occurrences the approver is asked about, in local time (or why there are none)."""
    try:
        found = occurrences(
            rule=args.rrule, first_start=args.start_at, duration=args.end_at - args.start_at
        )
    except BookingError as exc:
        return f"occurrences: {exc.message}"
    times = ", ".join(f"{timezone.localtime(o.start_at):%Y-%m-%d %H:%M}" for o in found)
    return f"{len(found)} occurrences: {times}"


def reserve_series_recheck(ctx: CallContext, args: ReserveSeriesInput) -> tuple[Message, ...]:
    """What would make this waiting series fail if it ran now (empty: it can still succeed):
    a rule no longer valid, the first meeting begun, its room gone, or meetings taken meanwhile
    ("all": any of them; "free only": every one)."""
    try:
        found = occurrences(
            rule=args.rrule, first_start=args.start_at, duration=args.end_at - args.start_at
        )
    except BookingError as exc:
        return (Message(exc.message, exc.params),)
    problems = []
    if args.start_at <= timezone.now():
        problems.append(Message(gettext_noop("The time has already begun or passed.")))
    taken = series_service.occurrences_taken(room_code=args.room_id, found=found)
    if taken is None:
        return (Message(gettext_noop("%(room)s no longer exists."), {"room": args.room_id}),)
    if taken and (args.mode == "all" or taken == len(found)):
        problems.append(
            Message(
                gettext_noop("%(room)s is already booked at %(count)d of these times."),
                {"room": args.room_id, "count": taken},
            )
        )
    return tuple(problems)


def reserve_series_policy_facts(args: ReserveSeriesInput) -> dict[str, Any]:
    """The room facts the series' risk and write depend on (approval flag, department, capacity,
    bookable), as an approval binds them: an admin's edit of the room voids it."""
    return {"room": args.room_id, "facts": selectors.room_facts(code=args.room_id)}


def reserve_series_environment_version(args: ReserveSeriesInput) -> int | None:
    """The newest version of the series' windows in its room (selectors.room_window_version)."""
    try:
        found = occurrences(
            rule=args.rrule, first_start=args.start_at, duration=args.end_at - args.start_at
        )
    except BookingError:
        return selectors.room_schedule_version(code=args.room_id)
    windows = [(o.start_at, o.end_at) for o in found]
    return selectors.room_window_version(code=args.room_id, windows=windows)


def reserve_series_summarize(receipt: dict[str, Any], language: str) -> str:
    booked = [b for b in receipt.get("booked", []) if b["status"] == "confirmed"]
    skipped = len(receipt.get("skipped", []))
    with translation.override(language):
        text = ngettext(
            "Booked %(count)d meeting in %(room)s.",
            "Booked %(count)d meetings in %(room)s.",
            len(booked),
        ) % {"count": len(booked), "room": receipt["room_id"]}
        if skipped:
            text += " " + ngettext(
                "%(count)d time was taken and skipped.",
                "%(count)d times were taken and skipped.",
                skipped,
            ) % {"count": skipped}
        return text


def cancel_series_lookup_receipt(key: str) -> ReceiptLookup:
    try:
        with transaction.atomic():
            _after_key(key)
            done = (
                SeriesCancellation.objects.select_related("series__room")
                .filter(idempotency_key=key)
                .first()
            )
    except OperationalError as exc:
        return ReceiptLookup(ReceiptStatus.UNKNOWN, detail=f"lookup failed: {exc}"[:200])
    if done is None:
        return ReceiptLookup(ReceiptStatus.ABSENT, detail="no series was cancelled under this key")
    data = {
        "series_id": done.series_id,
        "room_id": done.series.room.code,
        "cancelled": list(done.cancelled),
        "replayed": False,
    }
    return ReceiptLookup(
        ReceiptStatus.FOUND, CancelSeriesOutput.model_validate(data).model_dump(mode="json")
    )


def cancel_series_verify(receipt: dict[str, Any], ctx: CallContext) -> Verification:
    codes = receipt.get("cancelled", [])
    series_id = receipt.get("series_id")
    series = BookingSeries.objects.filter(pk=series_id).first() if series_id else None
    if series is None or series.requester_id != ctx.user.pk:
        return Verification(False, "series not found")
    still = list(
        series.bookings.filter(code__in=codes)
        .exclude(status=BookingStatus.CANCELLED)
        .values_list("code", flat=True)
    )
    if still:
        return Verification(False, f"still confirmed: {still}")
    return Verification(True, f"series {series.pk}: {len(codes)} occurrences cancelled")


def cancel_series_risk(ctx: CallContext, args: CancelSeriesInput) -> Risk:
    return Risk(SideEffect.MEDIUM)


def cancel_series_summarize(receipt: dict[str, Any], language: str) -> str:
    count = len(receipt.get("cancelled", []))
    with translation.override(language):
        if not count:
            return gettext("Nothing was left to cancel in this series.")
        return ngettext(
            "Cancelled %(count)d meeting of the series.",
            "Cancelled %(count)d meetings of the series.",
            count,
        ) % {"count": count}
