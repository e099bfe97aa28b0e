"""Booking writes. Every function here either commits all of its effect or raises BookingError
having written nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import Q
from django.utils import timezone

from bookings import rules
from bookings.errors import BookingError
from bookings.models import Booking, BookingStatus, Role, Room, User

# One statement does the whole reservation: lock the room row and bump its schedule version
# (only if it still fits and, when an expected version is given, nothing that touches this
# window changed since that version), then insert the booking. The exclusion constraint refuses
# an overlap, which aborts the statement and so the version bump with it. One round trip.
#
# "Stale" is judged per window, from the versions each booking's insert and cancel produced:
# a write to another time of the same room does not invalidate an observation of this window
# (a per-room check alone turns every busy room into a stream of false conflicts).
# The advisory lock on the idempotency key is held until commit, so that a receipt lookup
# (selectors.booking_lookup_receipt) waits for an in-flight write of the same key.
_RESERVE_SQL = """
WITH guard AS (SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 0))),
room AS (
    UPDATE bookings_room
       SET schedule_version = schedule_version + 1
     WHERE code = %(room)s
       AND bookable
       AND capacity >= %(attendees)s
       AND equipment @> %(equipment)s::varchar[]
       AND (%(expected)s::integer IS NULL OR (
            %(expected)s::integer <= schedule_version
            AND NOT EXISTS (
                SELECT FROM bookings_booking b
                 WHERE b.room_id = bookings_room.id
                   AND b.during && tstzrange(%(start)s, %(end)s, '[)')
                   AND (b.created_version > %(expected)s::integer
                        OR b.cancelled_version > %(expected)s::integer))))
       AND EXISTS (SELECT FROM guard)
 RETURNING id, schedule_version
)
INSERT INTO bookings_booking
       (room_id, requester_id, during, attendees, status, idempotency_key, run_id, action_id,
        created_version, created_at)
SELECT room.id, %(requester)s, tstzrange(%(start)s, %(end)s, '[)'), %(attendees)s, 'confirmed',
       %(key)s, %(run_id)s, %(action_id)s, room.schedule_version, now()
  FROM room
RETURNING id, code, room_id, created_at, (SELECT schedule_version FROM room)
"""


@dataclass(frozen=True)
class Reservation:
    booking: Booking
    room_code: str
    schedule_version: int
    replayed: bool


def booking_reserve(
    *,
    user: User,
    room_code: str,
    start_at: datetime,
    end_at: datetime,
    attendees: int,
    equipment: Sequence[str] = (),
    expected_version: int | None = None,
    idempotency_key: str,
    run_id: str = "",
    action_id: str = "",
) -> Reservation:
    """Reserve a room atomically for ``user``.

    The same ``idempotency_key`` returns the first booking again (``replayed``) when the
    request is the same, and is refused as ``idempotency_key_reuse`` when it is not.
    A stale ``expected_version`` or an overlap is ``conflict``.
    """
    now = timezone.now()
    rules.check_window(start_at, end_at, now=now)
    rules.check_attendees(attendees)
    wanted = rules.normalize_equipment(equipment)
    if not idempotency_key or len(idempotency_key) > 200:
        raise BookingError(
            "invalid_input",
            "bad_idempotency_key",
            "An idempotency key of 1-200 characters is required.",
        )
    params = {
        "room": room_code,
        "attendees": attendees,
        "equipment": wanted,
        "expected": expected_version,
        "requester": user.pk,
        "start": start_at,
        "end": end_at,
        "key": idempotency_key,
        "run_id": run_id,
        "action_id": action_id,
    }
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_RESERVE_SQL, params)
            row = cursor.fetchone()
    except IntegrityError as exc:
        constraint = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", "") or ""
        if constraint != "booking_no_overlap" and "idempotency_key" not in constraint:
            raise
        row = None
    if row is None:
        # Refused. A replay of a request that already succeeded is refused too (its slot is
        # taken and its version moved on by itself), so the key is asked first.
        if Booking.objects.filter(idempotency_key=idempotency_key).exists():
            return _replay(
                user=user,
                key=idempotency_key,
                room_code=room_code,
                start_at=start_at,
                end_at=end_at,
                attendees=attendees,
            )
        _explain_refusal(
            room_code=room_code,
            start_at=start_at,
            end_at=end_at,
            attendees=attendees,
            wanted=wanted,
            expected_version=expected_version,
        )
    booking_id, code, room_id, created_at, version = row
    booking = Booking(
        id=booking_id,
        code=code,
        room_id=room_id,
        requester=user,
        during=DateTimeTZRange(start_at, end_at, "[)"),
        attendees=attendees,
        status=BookingStatus.CONFIRMED,
        idempotency_key=idempotency_key,
        run_id=run_id,
        action_id=action_id,
        created_version=version,
        created_at=created_at,
    )
    booking._state.adding = False
    return Reservation(
        booking=booking, room_code=room_code, schedule_version=version, replayed=False
    )


def _replay(
    *, user: User, key: str, room_code: str, start_at: datetime, end_at: datetime, attendees: int
) -> Reservation:
    first = Booking.objects.select_related("room").get(idempotency_key=key)
    same = (
        first.requester_id == user.pk
        and first.room.code == room_code
        and first.during.lower == start_at
        and first.during.upper == end_at
        and first.attendees == attendees
    )
    if not same:
        raise BookingError(
            "idempotency_key_reuse",
            "idempotency_key_reuse",
            "This idempotency key was already used for a different booking request.",
            "Use a new key for a new request.",
        )
    return Reservation(
        booking=first,
        room_code=first.room.code,
        schedule_version=first.room.schedule_version,
        replayed=True,
    )


def _explain_refusal(
    *,
    room_code: str,
    start_at: datetime,
    end_at: datetime,
    attendees: int,
    wanted: list[str],
    expected_version: int | None,
) -> None:
    """Say which rule refused the reservation (the single statement only says 'no')."""
    room = Room.objects.filter(code=room_code).first()
    if room is None:
        raise BookingError(
            "not_found",
            "room_not_found",
            f"There is no room {room_code}.",
            "Use a room code returned by the availability search.",
        )
    if not room.bookable:
        raise BookingError(
            "invalid_input",
            "room_not_bookable",
            f"{room_code} cannot be booked.",
            "Pick another room.",
        )
    if attendees > room.capacity:
        raise BookingError(
            "invalid_input",
            "over_capacity",
            f"{room_code} holds {room.capacity} people, not {attendees}.",
            "Pick a larger room.",
        )
    missing = sorted(set(wanted) - set(room.equipment))
    if missing:
        raise BookingError(
            "invalid_input",
            "missing_equipment",
            f"{room_code} has no {', '.join(missing)}.",
            "Pick a room that has it.",
        )
    if expected_version is not None and (
        expected_version > room.schedule_version
        or room.bookings.filter(during__overlap=DateTimeTZRange(start_at, end_at, "[)"))
        .filter(Q(created_version__gt=expected_version) | Q(cancelled_version__gt=expected_version))
        .exists()
    ):
        raise BookingError(
            "conflict",
            "stale_version",
            f"{room_code}'s schedule for that time changed since it was read (version {expected_version}, "
            f"now {room.schedule_version}).",
            "Search availability again before reserving.",
        )
    raise BookingError(
        "conflict",
        "slot_taken",
        f"{room_code} is already booked for part of that time.",
        "Search again and pick another room or time.",
    )


@transaction.atomic
def booking_cancel(*, user: User, booking_code: str) -> Booking:
    """Cancel a confirmed booking and bump its room's schedule version.

    Only the requester may cancel, or an admin. Cancelling a cancelled booking returns it
    unchanged. Locks the room row, then the booking: the order booking_reserve takes them in
    (its insert waits on the booking only while holding the room), so the two never deadlock.
    """
    found = Booking.objects.filter(code=booking_code).values_list("room_id", flat=True).first()
    if found is None:
        raise BookingError("not_found", "booking_not_found", f"There is no booking {booking_code}.")
    room = Room.objects.select_for_update().get(pk=found)
    booking = Booking.objects.select_for_update().get(code=booking_code)
    booking.room = room
    if booking.requester_id != user.pk and not user.has_role(Role.ADMIN):
        raise BookingError(
            "forbidden",
            "not_your_booking",
            f"{booking_code} belongs to someone else.",
            "Only its requester or an admin may cancel it.",
        )
    if booking.status == BookingStatus.CANCELLED:
        return booking
    room.schedule_version += 1
    room.save(update_fields=["schedule_version"])
    booking.status = BookingStatus.CANCELLED
    booking.cancelled_at = timezone.now()
    booking.cancelled_by = user
    booking.cancelled_version = room.schedule_version
    booking.save(update_fields=["status", "cancelled_at", "cancelled_by", "cancelled_version"])
    return booking
