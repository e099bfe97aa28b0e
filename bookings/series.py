"""Recurring bookings: preview a series, book it in one transaction, cancel part or all of it.

Each occurrence is an ordinary Booking (under the exclusion constraint, with its own code);
the series is one write: its room's row is locked first (the lock order of every schedule
writer), every chosen occurrence is inserted, and the schedule version moves once. Every
function either commits all of its effect or raises BookingError having written nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone
from django.utils.translation import gettext_noop

from accounts.models import User
from agentops.contract import governed_call
from bookings import rules, selectors
from bookings.errors import BookingError
from bookings.live import bookings_changed
from bookings.locks import bookings_lock, cancel_stamp
from bookings.models import Booking, BookingSeries, BookingStatus, Room, SeriesCancellation
from bookings.recurrence import Occurrence, occurrences

MAX_KEY = 190  # the occurrences' keys are "<series key>#<n>" within Booking's 200


class SeriesMode(StrEnum):
    ALL = "all"  # every occurrence, or nothing when one is taken
    FREE_ONLY = "free_only"  # the free ones; the taken ones are skipped


@dataclass(frozen=True)
class PreviewRow:
    occurrence: Occurrence
    free: bool


@dataclass(frozen=True)
class SeriesPreview:
    room: Room
    rule: str
    rows: list[PreviewRow]
    needs_approval: bool
    approval_reasons: list[str]  # English msgids (gettext_noop), rendered by the screen

    @property
    def taken(self) -> int:
        return sum(not r.free for r in self.rows)

    @property
    def free(self) -> int:
        return len(self.rows) - self.taken


@dataclass(frozen=True)
class SeriesReservation:
    series: BookingSeries
    booked: list[Booking]
    skipped: list[Occurrence]
    replayed: bool


def _key_lock(key: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])


def _room_for(user: User, room_code: str, *, lock: bool) -> Room:
    room = selectors.room_get(code=room_code, user=user)
    if room is None:
        raise BookingError(
            "not_found",
            "room_not_found",
            gettext_noop("There is no room %(room)s."),
            gettext_noop("Use a room code returned by the availability search."),
            params={"room": room_code},
        )
    if lock:
        room = Room.objects.select_for_update().get(pk=room.pk)
    if not room.bookable:
        raise BookingError(
            "invalid_input",
            "room_not_bookable",
            gettext_noop("%(room)s cannot be booked."),
            gettext_noop("Pick another room."),
            params={"room": room.code},
        )
    return room


def _check_fits(room: Room, attendees: int, equipment: Sequence[str]) -> None:
    rules.check_attendees(attendees)
    if attendees > room.capacity:
        raise BookingError(
            "invalid_input",
            "over_capacity",
            gettext_noop("%(room)s holds %(capacity)d people, not %(attendees)d."),
            gettext_noop("Pick a larger room."),
            params={"room": room.code, "capacity": room.capacity, "attendees": attendees},
        )
    missing = sorted(set(rules.normalize_equipment(equipment)) - set(room.equipment))
    if missing:
        raise BookingError(
            "invalid_input",
            "missing_equipment",
            gettext_noop("%(room)s has no %(equipment)s."),
            gettext_noop("Pick a room that has it."),
            params={"room": room.code, "equipment": rules.equipment_list(missing)},
        )


def _occurrences(
    *, rule: str, start_at: datetime, end_at: datetime, now: datetime
) -> list[Occurrence]:
    rules.check_window(start_at, end_at, now=now)
    found = occurrences(rule=rule, first_start=start_at, duration=end_at - start_at)
    for occurrence in found:
        rules.check_window(occurrence.start_at, occurrence.end_at, now=now)
    return found


def _free_flags(room: Room, found: list[Occurrence]) -> list[bool]:
    """For each occurrence: no confirmed booking of the room overlaps it (one query)."""
    span = DateTimeTZRange(found[0].start_at, found[-1].end_at, "[)")
    busy = list(
        Booking.objects.filter(
            room=room, status=BookingStatus.CONFIRMED, during__overlap=span
        ).values_list("during", flat=True)
    )
    return [not any(b.lower < o.end_at and o.start_at < b.upper for b in busy) for o in found]


def occurrences_taken(*, room_code: str, found: list[Occurrence]) -> int | None:
    """How many of ``found`` a confirmed booking of the room already holds (None: no such
    room): what an approver's card says of a waiting series."""
    room = Room.objects.filter(code=room_code).first()
    if room is None:
        return None
    return sum(not free for free in _free_flags(room, found)) if found else 0


def approval_reasons(*, user: User, room: Room) -> list[str]:
    """Why booking this room asks an approver (the booking policy's room rules), as msgids."""
    reasons = []
    if room.requires_approval:
        reasons.append(gettext_noop("It is a premium room that needs an approver's OK."))
    department = getattr(user, "department", "")
    if department and room.department != department:
        reasons.append(gettext_noop("It belongs to another department."))
    return reasons


def series_preview(
    *,
    user: User,
    room_code: str,
    start_at: datetime,
    end_at: datetime,
    rule: str,
    attendees: int,
    equipment: Sequence[str] = (),
    now: datetime | None = None,
) -> SeriesPreview:
    """Every occurrence of the series with whether the room is free then (others' bookings are
    only "taken": no details), and whether booking it waits for an approver. Writes nothing."""
    now = now or timezone.now()
    room = _room_for(user, room_code, lock=False)
    _check_fits(room, attendees, equipment)
    found = _occurrences(rule=rule, start_at=start_at, end_at=end_at, now=now)
    flags = _free_flags(room, found)
    reasons = approval_reasons(user=user, room=room)
    return SeriesPreview(
        room=room,
        rule=rule,
        rows=[PreviewRow(o, f) for o, f in zip(found, flags, strict=True)],
        needs_approval=bool(reasons),
        approval_reasons=reasons,
    )


@transaction.atomic
def series_reserve(
    *,
    user: User,
    room_code: str,
    start_at: datetime,
    end_at: datetime,
    rule: str,
    attendees: int,
    equipment: Sequence[str] = (),
    mode: SeriesMode,
    idempotency_key: str,
    run_id: str = "",
    action_id: str = "",
    now: datetime | None = None,
) -> SeriesReservation:
    """Book every occurrence of the series (``mode`` ALL: or nothing when any is taken) or the
    free ones (FREE_ONLY: the taken ones are skipped; nothing at all is a conflict). One
    transaction: the key's advisory lock, the room's row lock, the series row, each occurrence
    under the exclusion constraint, the room's schedule version once. The same key returns the
    first series again (``replayed``) for the same request, ``idempotency_key_reuse`` otherwise."""
    now = now or timezone.now()
    if not idempotency_key or len(idempotency_key) > MAX_KEY:
        raise BookingError(
            "invalid_input",
            "bad_idempotency_key",
            gettext_noop("An idempotency key of 1-200 characters is required."),
        )
    _key_lock(idempotency_key)
    first = BookingSeries.objects.filter(idempotency_key=idempotency_key).first()
    if first is not None:
        return _replay(first, user=user, room_code=room_code, start_at=start_at, rule=rule)
    room = _room_for(user, room_code, lock=True)
    _check_fits(room, attendees, equipment)
    found = _occurrences(rule=rule, start_at=start_at, end_at=end_at, now=now)
    flags = _free_flags(room, found)
    chosen = [o for o, free in zip(found, flags, strict=True) if free]
    skipped = [o for o, free in zip(found, flags, strict=True) if not free]
    if skipped and (mode == SeriesMode.ALL or not chosen):
        raise BookingError(
            "conflict",
            "series_taken",
            gettext_noop("%(room)s is already booked at %(count)d of these times."),
            gettext_noop("Book only the free ones, or pick another room or time."),
            params={"room": room.code, "count": len(skipped)},
        )
    room.schedule_version += 1
    room.save(update_fields=["schedule_version"])
    series = BookingSeries.objects.create(
        requester=user,
        room=room,
        rule=rule,
        first_start=start_at,
        duration=end_at - start_at,
        attendees=attendees,
        idempotency_key=idempotency_key,
        run_id=run_id,
    )
    try:
        with transaction.atomic():
            Booking.objects.bulk_create(
                [
                    Booking(
                        room=room,
                        requester=user,
                        during=DateTimeTZRange(o.start_at, o.end_at, "[)"),
                        attendees=attendees,
                        idempotency_key=f"{idempotency_key}#{o.index}",
                        run_id=run_id,
                        action_id=action_id,
                        created_version=room.schedule_version,
                        series=series,
                    )
                    for o in chosen
                ]
            )
    except IntegrityError as exc:  # the constraint is the backstop: the room lock prevents it
        raise BookingError(
            "conflict",
            "slot_taken",
            gettext_noop("%(room)s is already booked for part of that time."),
            gettext_noop("Search again and pick another room or time."),
            params={"room": room.code},
        ) from exc
    booked = list(series.bookings.select_related("room").order_by("during"))
    bookings_changed(booked)  # open day views and room weeks re-read after the commit
    return SeriesReservation(series=series, booked=booked, skipped=skipped, replayed=False)


def _replay(
    first: BookingSeries, *, user: User, room_code: str, start_at: datetime, rule: str
) -> SeriesReservation:
    same = (
        first.requester_id == user.pk
        and first.room.code == room_code
        and first.first_start == start_at
        and first.rule == rule
    )
    if not same:
        raise BookingError(
            "idempotency_key_reuse",
            "idempotency_key_reuse",
            gettext_noop("This idempotency key was already used for a different booking request."),
            gettext_noop("Use a new key for a new request."),
        )
    booked = list(first.bookings.select_related("room").order_by("during"))
    return SeriesReservation(series=first, booked=booked, skipped=[], replayed=True)


def series_get(*, user: User, series_id: int) -> BookingSeries:
    """A series its requester may see; to anyone else it does not exist."""
    series = BookingSeries.objects.select_related("room").filter(pk=series_id).first()
    if series is None or series.requester_id != user.pk:
        raise BookingError(
            "not_found",
            "series_not_found",
            gettext_noop("There is no such series of yours."),
        )
    return series


@dataclass(frozen=True)
class SeriesCancelled:
    series: BookingSeries
    cancelled: list[str]  # booking codes
    replayed: bool


@transaction.atomic
def series_cancel(
    *,
    user: User,
    series_id: int,
    from_booking: str | None = None,
    idempotency_key: str,
    now: datetime | None = None,
) -> SeriesCancelled:
    """Cancel the series' confirmed occurrences from ``from_booking`` on ("this and the
    following"), or all that have not started yet (no ``from_booking``). Locks the room, then
    the bookings (every schedule writer's order); the schedule version moves once; each
    cancelled occurrence's SEQUENCE moves. The same key answers its first receipt again."""
    now = now or timezone.now()
    if not idempotency_key or len(idempotency_key) > MAX_KEY:
        raise BookingError(
            "invalid_input",
            "bad_idempotency_key",
            gettext_noop("An idempotency key of 1-200 characters is required."),
        )
    _key_lock(idempotency_key)
    done = SeriesCancellation.objects.filter(idempotency_key=idempotency_key).first()
    series = series_get(user=user, series_id=series_id)
    if done is not None:
        if done.series_id != series.pk:
            raise BookingError(
                "idempotency_key_reuse",
                "idempotency_key_reuse",
                gettext_noop("This idempotency key already cancelled another booking."),
                gettext_noop("Use a new key for a new request."),
            )
        return SeriesCancelled(series=series, cancelled=list(done.cancelled), replayed=True)
    from_start = now
    if from_booking is not None:
        anchor = series.bookings.filter(code=from_booking).first()
        if anchor is None:
            raise BookingError(
                "not_found",
                "booking_not_found",
                gettext_noop("There is no booking %(code)s."),
                params={"code": from_booking},
            )
        from_start = anchor.start_at
    # Each meeting in the room it is in now (one may have been moved to another room), each
    # room's version moved once, each meeting stamped with its own room's (bookings.locks).
    _, locked = bookings_lock(
        pks=series.bookings.filter(
            status=BookingStatus.CONFIRMED, during__startswith__gte=from_start
        ).values_list("pk", flat=True)
    )
    targets = sorted(
        (
            b
            for b in locked.values()
            # re-read under the lock; a meeting that is over stays as it was
            if b.status == BookingStatus.CONFIRMED and b.start_at >= from_start and b.end_at > now
        ),
        key=lambda b: b.start_at,
    )
    cancel_stamp(targets)
    for booking in targets:
        booking.status = BookingStatus.CANCELLED
        booking.cancelled_at = now
        booking.cancelled_by = user
        booking.cancel_key = f"{idempotency_key}#{booking.code}"
        booking.sequence += 1
    Booking.objects.bulk_update(
        targets,
        ["status", "cancelled_at", "cancelled_by", "cancelled_version", "cancel_key", "sequence"],
    )
    bookings_changed(targets)  # open day views and room weeks re-read after the commit
    codes = [b.code for b in targets]
    SeriesCancellation.objects.create(
        series=series, idempotency_key=idempotency_key, from_start=from_start, cancelled=codes
    )
    return SeriesCancelled(series=series, cancelled=codes, replayed=False)


# --- the screens' governed writes ---------------------------------------------------------------


@dataclass(frozen=True)
class SeriesOutcome:
    """What a person's series request came to: ``booked`` (the tool's data: series_id, booked,
    skipped) or ``pending`` (it waits for an approver; the runtime's pending details)."""

    kind: str
    value: dict[str, Any]


def series_request(
    *,
    user: User,
    room_code: str,
    start_at: datetime,
    end_at: datetime,
    rule: str,
    attendees: int,
    mode: SeriesMode,
    idempotency_key: str,
) -> SeriesOutcome:
    """Book a series from the screens through the runtime's governance (one call, one approval
    for the whole series when its room needs one). Raises BookingError for a refusal."""
    envelope = governed_call(
        user=user,
        tool="reserve_series",
        arguments={
            "room_id": room_code,
            "start_at": start_at.isoformat(),
            "end_at": end_at.isoformat(),
            "rrule": rule,
            "attendees": attendees,
            "mode": mode.value,
        },
        idempotency_key=idempotency_key,
    )
    return _outcome(envelope)


def series_cancel_request(
    *, user: User, series_id: int, from_booking: str | None, idempotency_key: str
) -> SeriesOutcome:
    """Cancel this and the following occurrences, or all, through the runtime (one call)."""
    arguments: dict[str, Any] = {"series_id": series_id}
    if from_booking:
        arguments["from_booking_id"] = from_booking
    envelope = governed_call(
        user=user, tool="cancel_series", arguments=arguments, idempotency_key=idempotency_key
    )
    return _outcome(envelope)


def _outcome(envelope: dict[str, Any]) -> SeriesOutcome:
    if envelope.get("pending"):
        pending = envelope["pending"]
        return SeriesOutcome(
            "pending", pending | {"deadline": datetime.fromisoformat(pending["deadline"])}
        )
    if not envelope.get("ok"):
        raise BookingError.from_envelope(envelope)
    return SeriesOutcome("booked", envelope["data"])
