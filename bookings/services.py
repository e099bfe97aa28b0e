"""Booking writes. Every function here either commits all of its effect or raises BookingError
having written nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone
from django.utils.translation import gettext_noop

from accounts.models import Role, User
from accounts.selectors import user_roles
from agentops.contract import governed_call
from bookings import rules
from bookings.errors import BookingError
from bookings.live import schedule_changed
from bookings.locks import bookings_lock, cancel_stamp
from bookings.models import Booking, BookingChange, BookingStatus, Room
from bookings.selectors import booking_list_overlapping, room_window_version

# One statement does the whole reservation and says why when it does not:
# - `facts` locks the room row (FOR UPDATE) and reads what the rules need, including whether
#   the caller's expected version is still fresh for this window;
# - `ins` inserts the booking only if every rule holds; ON CONFLICT DO NOTHING turns an overlap
#   (the exclusion constraint) or a used idempotency key into "no row" instead of an error;
# - `bump` moves the room's schedule version only when a booking was inserted;
# - the final row reports the facts, the new booking, and whether the key or an overlap is
#   visible, so that a refusal needs no second query except in a rare race.
#
# Every reservation takes the room row lock first, then the booking: one lock order for all
# writers (booking_cancel too), so that a reserve and another reserve or cancel never deadlock
# inside the exclusion check.
#
# "Fresh" is judged per window, from the versions each booking's insert and cancel produced:
# a write to another time of the same room does not invalidate an observation of this window
# (a per-room check alone turns every busy room into a stream of false conflicts).
# The advisory lock on the idempotency key is held until commit, so that a receipt lookup
# (selectors.booking_lookup_receipt) waits for an in-flight write of the same key.
_RESERVE_SQL = """
WITH guard AS (SELECT pg_advisory_xact_lock(hashtextextended(%(key)s::varchar, 0))),
facts AS (
    SELECT r.id, r.bookable, r.capacity, r.equipment, r.schedule_version,
           -- the version this statement's snapshot saw; after waiting for the lock, r is the
           -- newest row but the subqueries still see the snapshot: a difference means "look again"
           CASE WHEN %(expected)s::integer IS NOT NULL THEN
               (SELECT s.schedule_version FROM bookings_room s WHERE s.id = r.id) <> r.schedule_version
           END AS moved,
           (%(expected)s::integer IS NULL OR (
                %(expected)s::integer <= r.schedule_version
                AND NOT EXISTS (
                    SELECT FROM bookings_booking b
                     WHERE b.room_id = r.id
                       AND b.during && tstzrange(%(start)s, %(end)s, '[)')
                       AND (b.created_version > %(expected)s::integer
                            OR b.cancelled_version > %(expected)s::integer)))) AS fresh
      FROM bookings_room r, guard
     WHERE r.code = %(room)s
       -- a sandbox room exists only for drill identities, and only it does (bookings/drills.py)
       AND r.sandbox = EXISTS (SELECT FROM accounts_user_groups ug
                                 JOIN auth_group g ON g.id = ug.group_id
                                WHERE ug.user_id = %(requester)s AND g.name = 'sandbox')
       FOR UPDATE OF r
),
ins AS (
    INSERT INTO bookings_booking
           (room_id, requester_id, during, attendees, title, status, idempotency_key, run_id,
            action_id, created_version, created_at)
    SELECT f.id, %(requester)s, tstzrange(%(start)s, %(end)s, '[)'), %(attendees)s, %(title)s,
           'confirmed',
           %(key)s::varchar, %(run_id)s, %(action_id)s, f.schedule_version + 1, now()
      FROM facts f
     WHERE f.bookable AND f.capacity >= %(attendees)s
       AND f.equipment @> %(equipment)s::varchar[] AND f.fresh
       AND (%(expected)s::integer IS NULL OR NOT f.moved)
        ON CONFLICT DO NOTHING
    RETURNING id, code, room_id, created_at, created_version
),
bump AS (
    UPDATE bookings_room r SET schedule_version = r.schedule_version + 1
      FROM ins WHERE r.id = ins.room_id
)
SELECT f.id, f.bookable, f.capacity, f.equipment, f.schedule_version, f.fresh, f.moved,
       ins.id, ins.code, ins.created_at, ins.created_version,
       CASE WHEN ins.id IS NULL THEN
           EXISTS (SELECT FROM bookings_booking k WHERE k.idempotency_key = %(key)s::varchar)
       END,
       CASE WHEN ins.id IS NULL THEN
           EXISTS (SELECT FROM bookings_booking o
                    WHERE o.room_id = f.id AND o.status = 'confirmed'
                      AND o.during && tstzrange(%(start)s, %(end)s, '[)'))
       END
  FROM (SELECT) one LEFT JOIN facts f ON true LEFT JOIN ins ON true
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
    title: str = "",
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
    title = rules.clean_title(title)
    if not idempotency_key or len(idempotency_key) > 200:
        raise BookingError(
            "invalid_input",
            "bad_idempotency_key",
            gettext_noop("An idempotency key of 1-200 characters is required."),
        )
    params: dict[str, Any] = {
        "title": title,
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
    # A single statement is atomic on its own: no transaction block, no extra round trips.
    with connection.cursor() as cursor:
        cursor.execute(_RESERVE_SQL, params)
        row = cursor.fetchone()
    if expected_version is not None and row[6] and row[7] is None:
        # It waited for the room while the schedule moved, so it judged freshness on an old
        # snapshot and inserted nothing. Again, holding the room lock first: every schedule
        # writer takes that lock, so this statement's snapshot is complete.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT FROM bookings_room WHERE code = %s FOR UPDATE", [room_code])
            cursor.execute(_RESERVE_SQL, params)
            row = cursor.fetchone()
    (
        room_id,
        bookable,
        capacity,
        equipment_has,
        current_version,
        fresh,
        _moved,
        booking_id,
        code,
        created_at,
        version,
        key_seen,
        overlap_seen,
    ) = row
    if booking_id is None:
        if room_id is None:
            raise BookingError(
                "not_found",
                "room_not_found",
                gettext_noop("There is no room %(room)s."),
                gettext_noop("Use a room code returned by the availability search."),
                params={"room": room_code},
            )
        # A replay of a request that already succeeded is refused by the same rules (its slot
        # is taken, its version moved on), so the key is asked first.
        if key_seen or (not overlap_seen and _key_used(idempotency_key)):
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
            bookable=bookable,
            capacity=capacity,
            equipment=equipment_has,
            version=current_version,
            fresh=fresh,
            attendees=attendees,
            wanted=wanted,
            expected_version=expected_version,
        )
    booking = Booking(
        id=booking_id,
        code=code,
        room_id=room_id,
        requester=user,
        during=DateTimeTZRange(start_at, end_at, "[)"),
        attendees=attendees,
        title=title,
        status=BookingStatus.CONFIRMED,
        idempotency_key=idempotency_key,
        run_id=run_id,
        action_id=action_id,
        created_version=version,
        created_at=created_at,
    )
    booking._state.adding = False
    schedule_changed([(room_code, start_at, end_at)])
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
            gettext_noop("This idempotency key was already used for a different booking request."),
            gettext_noop("Use a new key for a new request."),
        )
    return Reservation(
        booking=first,
        room_code=first.room.code,
        schedule_version=first.room.schedule_version,
        replayed=True,
    )


def _key_used(key: str) -> bool:
    """Asked only when the statement's snapshot could not tell (a write that committed while
    this one waited for the room lock)."""
    return Booking.objects.filter(idempotency_key=key).exists()


def _explain_refusal(
    *,
    room_code: str,
    bookable: bool,
    capacity: int,
    equipment: list[str],
    version: int,
    fresh: bool,
    attendees: int,
    wanted: list[str],
    expected_version: int | None,
) -> None:
    """Say which rule refused the reservation, from the facts the statement returned."""
    if not bookable:
        raise BookingError(
            "invalid_input",
            "room_not_bookable",
            gettext_noop("%(room)s cannot be booked."),
            gettext_noop("Pick another room."),
            params={"room": room_code},
        )
    if attendees > capacity:
        raise BookingError(
            "invalid_input",
            "over_capacity",
            gettext_noop("%(room)s holds %(capacity)d people, not %(attendees)d."),
            gettext_noop("Pick a larger room."),
            params={"room": room_code, "capacity": capacity, "attendees": attendees},
        )
    missing = sorted(set(wanted) - set(equipment))
    if missing:
        raise BookingError(
            "invalid_input",
            "missing_equipment",
            gettext_noop("%(room)s has no %(equipment)s."),
            gettext_noop("Pick a room that has it."),
            params={"room": room_code, "equipment": rules.equipment_list(missing)},
        )
    if not fresh:
        raise BookingError(
            "conflict",
            "stale_version",
            gettext_noop(
                "%(room)s's schedule for that time changed since it was read "
                "(version %(expected)s, now %(version)s)."
            ),
            gettext_noop("Search availability again before reserving."),
            params={"room": room_code, "expected": expected_version, "version": version},
        )
    raise BookingError(
        "conflict",
        "slot_taken",
        gettext_noop("%(room)s is already booked for part of that time."),
        gettext_noop("Search again and pick another room or time."),
        params={"room": room_code},
    )


@transaction.atomic
def booking_cancel(*, user: User, booking_code: str, idempotency_key: str = "") -> Booking:
    """Cancel a confirmed booking and bump its room's schedule version.

    Only the requester may cancel, or an admin; to anyone else another employee's booking
    looks like no booking at all (codes are sequential: "not yours" would confirm that it
    exists). Cancelling a cancelled booking returns it unchanged. Locks the room row, then the
    booking: the order booking_reserve takes them in (its insert waits on the booking only while
    holding the room), so the two never deadlock. With ``idempotency_key``, the cancel records
    it on the booking (``cancel_key``) and holds the key's advisory lock until commit, so
    booking_lookup_cancel can say what happened to it.
    """
    if len(idempotency_key) > 200:
        raise BookingError(
            "invalid_input",
            "bad_idempotency_key",
            gettext_noop("An idempotency key of 1-200 characters is required."),
        )
    if idempotency_key:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [idempotency_key]
            )
    found = Booking.objects.filter(code=booking_code).values_list("pk", "requester_id").first()
    if found is None or (found[1] != user.pk and Role.ADMIN not in user_roles(user=user)):
        raise BookingError(
            "not_found",
            "booking_not_found",
            gettext_noop("There is no booking %(code)s."),
            params={"code": booking_code},
        )
    _, locked = bookings_lock(pks=[found[0]])
    booking = locked[found[0]]
    room = booking.room
    if idempotency_key and (
        Booking.objects.filter(cancel_key=idempotency_key).exclude(pk=booking.pk).exists()
    ):
        raise BookingError(
            "idempotency_key_reuse",
            "idempotency_key_reuse",
            gettext_noop("This idempotency key already cancelled another booking."),
            gettext_noop("Use a new key for a new request."),
        )
    if booking.status == BookingStatus.CANCELLED:
        return booking
    cancel_stamp([booking])
    booking.status = BookingStatus.CANCELLED
    booking.cancelled_at = timezone.now()
    booking.cancelled_by = user
    booking.cancel_key = idempotency_key
    booking.sequence += 1  # calendars see the cancellation as a newer version of the event
    booking.save(
        update_fields=[
            "status",
            "cancelled_at",
            "cancelled_by",
            "cancelled_version",
            "cancel_key",
            "sequence",
        ]
    )
    schedule_changed([(room.code, booking.start_at, booking.end_at)])
    return booking


@dataclass(frozen=True)
class BookingOutcome:
    """What a person's booking request came to: ``reservation`` (a Reservation) or
    ``pending`` (it waits for an approver; the runtime's pending details)."""

    kind: str
    value: Reservation | dict


def booking_request(
    *,
    user: User,
    room_code: str,
    start_at: datetime,
    end_at: datetime,
    attendees: int,
    equipment: Sequence[str] = (),
    idempotency_key: str,
    observed_version: int | None = None,
    title: str = "",
    another_room: bool = False,
) -> BookingOutcome:
    """Book for a person from the screens, through the runtime's governance (the same gate,
    policy, approvals, idempotency and audit as the assistant). Raises BookingError for a
    refusal, in the words the screens show. ``observed_version`` is the room's schedule version
    the person saw (stale only if that window changed since); without it, the current one.

    A person who already holds a room at that time gets a second one only when they say so
    (``another_room``): the assistant's rule, the same on the screens (README, "Two rooms at
    once")."""
    if not another_room:
        _refuse_second_room(user=user, start_at=start_at, end_at=end_at, key=idempotency_key)
    if observed_version is None:
        observed_version = (
            Room.objects.filter(code=room_code).values_list("schedule_version", flat=True).first()
        )
    asked_at = timezone.now()
    envelope = governed_call(
        user=user,
        tool="reserve_room",
        arguments={
            "room_id": room_code,
            "start_at": start_at.isoformat(),
            "end_at": end_at.isoformat(),
            "attendees": attendees,
            "equipment": list(equipment),
            "expected_version": observed_version or 0,
        }
        | ({"title": title} if title else {}),
        idempotency_key=idempotency_key,
    )
    if envelope.get("pending"):
        pending = envelope["pending"]
        return BookingOutcome(
            "pending", pending | {"deadline": datetime.fromisoformat(pending["deadline"])}
        )
    if not envelope.get("ok"):
        raise _in_plain_words(BookingError.from_envelope(envelope))
    data = envelope["data"]
    booking = Booking.objects.select_related("room").get(code=data["booking_id"])
    return BookingOutcome(
        "reservation",
        Reservation(
            booking,
            data["room_id"],
            booking.room.schedule_version,
            # The runtime replays a finished call under the same key: then the booking
            # predates this request (a double submit).
            bool(data["replayed"]) or booking.created_at < asked_at,
        ),
    )


@dataclass(frozen=True)
class Change:
    """A changed booking (same row, same code) and the receipt of the change."""

    booking: Booking
    receipt: BookingChange
    replayed: bool


@transaction.atomic
def booking_change(
    *,
    user: User,
    booking_code: str,
    idempotency_key: str,
    room_code: str | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    attendees: int | None = None,
    title: str | None = None,
    expected_version: int | None = None,
    run_id: str = "",
    action_id: str = "",
) -> Change:
    """Change a confirmed booking in place (it keeps its code): room, time, people, title. A
    field left ``None`` stays as it is.

    Holds the key's advisory lock until commit (a receipt lookup waits for it), then locks the
    rooms involved in id order, then the booking: every schedule writer takes rooms before
    bookings, so a change never deadlocks with a reserve, a cancel or another change.
    ``expected_version`` is the target room's schedule version the person saw: stale (conflict)
    when a booking of the new window was written since, as for a reservation. Bumps the
    schedule version of each room whose schedule changed and records a BookingChange under the
    key; the same key with the same change answers the first receipt (``replayed``)."""
    if not idempotency_key or len(idempotency_key) > 200:
        raise BookingError(
            "invalid_input",
            "bad_idempotency_key",
            gettext_noop("An idempotency key of 1-200 characters is required."),
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [idempotency_key])
    found = (
        Booking.objects.filter(code=booking_code)
        .values_list("room_id", "requester_id", "room__sandbox", "pk")
        .first()
    )
    if found is None or (found[1] != user.pk and Role.ADMIN not in user_roles(user=user)):
        raise BookingError(
            "not_found",
            "booking_not_found",
            gettext_noop("There is no booking %(code)s."),
            params={"code": booking_code},
        )
    first = BookingChange.objects.filter(idempotency_key=idempotency_key).first()
    if first is not None:
        return _change_replay(
            first,
            booking_code=booking_code,
            room_code=room_code,
            start_at=start_at,
            end_at=end_at,
            attendees=attendees,
            title=title,
        )
    target = (
        Room.objects.filter(code=room_code, sandbox=found[2]).values_list("pk", flat=True).first()
        if room_code is not None
        else found[0]
    )
    if target is None:
        raise BookingError(
            "not_found",
            "room_not_found",
            gettext_noop("There is no room %(room)s."),
            gettext_noop("Use a room code returned by the availability search."),
            params={"room": room_code},
        )
    # The rooms the booking is in now and the target, then the booking: a change that moved
    # it while this waited is seen here, not by a read from before the lock.
    locked, bookings = bookings_lock(pks=[found[3]], rooms=[target])
    booking = bookings[found[3]]
    old_room, new_room = booking.room, locked[target]
    if booking.status != BookingStatus.CONFIRMED:
        raise BookingError(
            "conflict",
            "booking_not_confirmed",
            gettext_noop("%(code)s is cancelled; a cancelled booking cannot be changed."),
            gettext_noop("Book a new room instead."),
            params={"code": booking_code},
        )
    start = start_at if start_at is not None else booking.start_at
    end = end_at if end_at is not None else booking.end_at
    people = attendees if attendees is not None else booking.attendees
    new_title = rules.clean_title(title) if title is not None else booking.title
    rules.check_window(start, end, now=timezone.now())
    rules.check_attendees(people)
    moved = new_room.pk != old_room.pk or (start, end) != (booking.start_at, booking.end_at)
    # Before "nothing to change": a change that lost a race to another change is told so.
    _check_fresh(new_room, start=start, end=end, expected=expected_version)
    if not moved and (people, new_title) == (booking.attendees, booking.title):
        raise BookingError(
            "invalid_input",
            "nothing_to_change",
            gettext_noop("That is %(code)s as it already is: nothing to change."),
            gettext_noop("Change the room, the time, the people or the title."),
            params={"code": booking_code},
        )
    _check_change(booking, new_room, start=start, end=end, people=people)
    receipt = BookingChange(
        booking=booking,
        idempotency_key=idempotency_key,
        changed_by=user,
        from_room=old_room,
        from_during=booking.during,
        from_attendees=booking.attendees,
        from_title=booking.title,
        to_room=new_room,
        to_during=DateTimeTZRange(start, end, "[)"),
        to_attendees=people,
        to_title=new_title,
        run_id=run_id,
        action_id=action_id,
    )
    if moved:
        for room in {old_room.pk: old_room, new_room.pk: new_room}.values():
            room.schedule_version += 1
            room.save(update_fields=["schedule_version"])
        booking.created_version = new_room.schedule_version
        # A check-in is for the meeting where and when it was: a moved one is checked in anew,
        # else checking in and then moving it would dodge the no-show release.
        booking.checked_in_at = None
        schedule_changed(
            [(old_room.code, booking.start_at, booking.end_at), (new_room.code, start, end)]
        )
    booking.room, booking.during = new_room, DateTimeTZRange(start, end, "[)")
    booking.attendees, booking.title = people, new_title
    booking.sequence += 1  # calendars see the change as a newer version of the same event
    try:
        with transaction.atomic():
            booking.save(
                update_fields=[
                    "room",
                    "during",
                    "attendees",
                    "title",
                    "created_version",
                    "checked_in_at",
                    "sequence",
                ]
            )
    except IntegrityError as exc:  # the exclusion constraint: the backstop of _check_change
        if getattr(exc.__cause__, "sqlstate", None) != "23P01":
            raise
        raise _slot_taken(new_room.code) from exc
    receipt.save()
    return Change(booking=booking, receipt=receipt, replayed=False)


def _check_change(
    booking: Booking,
    room: Room,
    *,
    start: datetime,
    end: datetime,
    people: int,
) -> None:
    """The reservation rules for the new room and window, the booking itself left out."""
    if not room.bookable:
        raise BookingError(
            "invalid_input",
            "room_not_bookable",
            gettext_noop("%(room)s cannot be booked."),
            gettext_noop("Pick another room."),
            params={"room": room.code},
        )
    if people > room.capacity:
        raise BookingError(
            "invalid_input",
            "over_capacity",
            gettext_noop("%(room)s holds %(capacity)d people, not %(attendees)d."),
            gettext_noop("Pick a larger room."),
            params={"room": room.code, "capacity": room.capacity, "attendees": people},
        )
    window = DateTimeTZRange(start, end, "[)")
    others = Booking.objects.filter(room=room, during__overlap=window).exclude(pk=booking.pk)
    if others.filter(status=BookingStatus.CONFIRMED).exists():
        raise _slot_taken(room.code)


def _check_fresh(room: Room, *, start: datetime, end: datetime, expected: int | None) -> None:
    """A change read the target room at ``expected``: stale (conflict) when the window's
    version is newer (selectors.room_window_version). The window's version counts the booking
    itself: a change of it that committed after the version this change read (another change
    moved it here) makes this one stale, so of concurrent changes read at one version exactly
    one wins."""
    if expected is None:
        return
    window_version = cast(int, room_window_version(code=room.code, windows=[(start, end)]))
    if expected > room.schedule_version or window_version > expected:
        raise BookingError(
            "conflict",
            "stale_version",
            gettext_noop(
                "%(room)s's schedule for that time changed since it was read "
                "(version %(expected)s, now %(version)s)."
            ),
            gettext_noop("Look at the free times again, then change it."),
            params={"room": room.code, "expected": expected, "version": room.schedule_version},
        )


def _slot_taken(room_code: str) -> BookingError:
    return BookingError(
        "conflict",
        "slot_taken",
        gettext_noop("%(room)s is already booked for part of that time."),
        gettext_noop("Search again and pick another room or time."),
        params={"room": room_code},
    )


def _change_replay(
    first: BookingChange,
    *,
    booking_code: str,
    room_code: str | None,
    start_at: datetime | None,
    end_at: datetime | None,
    attendees: int | None,
    title: str | None,
) -> Change:
    booking = Booking.objects.select_related("room").get(pk=first.booking_id)
    asked = (booking_code, room_code, start_at, end_at, attendees, title)
    done = (
        booking.code,
        first.to_room.code,
        first.to_during.lower,
        first.to_during.upper,
        first.to_attendees,
        first.to_title,
    )
    if any(a is not None and a != d for a, d in zip(asked, done, strict=True)):
        raise BookingError(
            "idempotency_key_reuse",
            "idempotency_key_reuse",
            gettext_noop("This idempotency key was already used for a different change."),
            gettext_noop("Use a new key for a new request."),
        )
    return Change(booking=booking, receipt=first, replayed=True)


def _refuse_second_room(*, user: User, start_at: datetime, end_at: datetime, key: str) -> None:
    # A double submit of this very request (its booking carries the key, namespaced by the
    # runtime as "<channel>:<user>:<key>") is a replay, not a second room.
    held = [
        b
        for b in booking_list_overlapping(user=user, start_at=start_at, end_at=end_at, limit=5)
        if not b.idempotency_key.endswith(f":{key}")
    ]
    if held:
        raise BookingError(
            "conflict",
            "second_room",
            gettext_noop("You already hold %(room)s at that time (booking %(code)s)."),
            gettext_noop('To hold another room too, tick "Yes, I need another room too".'),
            params={"room": held[0].room.code, "code": held[0].code},
        )


# A lost race in the words of the person who lost it (the tools' own words stay for models).
_LOST_RACE = {
    "slot_taken": gettext_noop("Someone booked %(room)s for that time a moment ago."),
    "stale_version": gettext_noop(
        "Someone changed %(room)s's bookings for that time a moment ago."
    ),
}


def _in_plain_words(error: BookingError) -> BookingError:
    if error.code not in _LOST_RACE or "room" not in error.params:
        return error
    return BookingError(
        error.reason,
        error.code,
        _LOST_RACE[error.code],
        gettext_noop("Here are the nearest free times."),
        params={"room": error.params["room"]},
    )


@dataclass(frozen=True)
class GovernedOutcome:
    """What a person's change or cancel from a screen came to: ``done`` (the booking as it is
    now) or ``pending`` (it waits for an approver; nothing changed yet)."""

    kind: str
    booking: Booking
    pending: dict | None = None


def _governed(*, user: User, tool: str, arguments: dict, key: str, code: str) -> GovernedOutcome:
    envelope = governed_call(user=user, tool=tool, arguments=arguments, idempotency_key=key)
    # cast: both outcomes returned below found the booking by this code (pending: only a HIGH
    # risk waits, and cancel_risk/change_risk claim HIGH only for a booking they found; done:
    # the tool changed it), and a booking is never deleted (cancelling is a status).
    booking = cast(Booking, Booking.objects.select_related("room").filter(code=code).first())
    if envelope.get("pending"):
        pending = envelope["pending"]
        return GovernedOutcome(
            "pending",
            booking,
            pending | {"deadline": datetime.fromisoformat(pending["deadline"])},
        )
    if not envelope.get("ok"):
        raise _in_plain_words(BookingError.from_envelope(envelope))
    return GovernedOutcome("done", booking)


def booking_change_request(
    *,
    user: User,
    booking_code: str,
    idempotency_key: str,
    room_code: str,
    start_at: datetime,
    end_at: datetime,
    attendees: int,
    title: str,
    observed_version: int | None = None,
) -> GovernedOutcome:
    """Change a booking from the screens through the runtime (change_booking: the same gate,
    policy, approvals and audit as every channel). The booking stays as it is until the change
    is made; a move that needs an approval waits for one (``pending``)."""
    if observed_version is None:
        observed_version = (
            Room.objects.filter(code=room_code).values_list("schedule_version", flat=True).first()
        )
    return _governed(
        user=user,
        tool="change_booking",
        arguments={
            "booking_id": booking_code,
            "room_id": room_code,
            "start_at": start_at.isoformat(),
            "end_at": end_at.isoformat(),
            "attendees": attendees,
            "title": title,
            "expected_version": observed_version or 0,
        },
        key=idempotency_key,
        code=booking_code,
    )


def booking_cancel_request(
    *, user: User, booking_code: str, idempotency_key: str
) -> GovernedOutcome:
    """Cancel from a screen (My bookings, the admin) through the runtime, as the API and MCP
    do: an Action, its trace, verification and audit row. Someone else's booking (an admin's
    cancel) waits for an approver other than the admin."""
    return _governed(
        user=user,
        tool="cancel_booking",
        arguments={"booking_id": booking_code},
        key=idempotency_key,
        code=booking_code,
    )
