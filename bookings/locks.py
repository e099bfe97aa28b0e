"""The schedule writers' one lock order, and who writes a version.

Every write to a room's schedule locks the rooms first, in id order, then the bookings. The
rooms to lock are the ones the bookings are in *now*: a booking read in R7 may have been moved
to R2 by a change that committed before its lock was granted. ``bookings_lock`` therefore checks,
holding the locks, that every booking is still in a room it holds, and otherwise gives the
locks back (a savepoint's rollback releases the row locks taken inside it) and tries again with
the rooms the bookings are in now. A version is written by the room whose schedule changed:
``cancel_stamp`` bumps each room that loses a booking and stamps each booking with its own
room's new version, never the version of a room it has left (which would make its new window
look changed to everyone who reads the new room)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.utils.translation import gettext_noop

from bookings.errors import BookingError
from bookings.models import Booking, Room

LOCK_TRIES = 5


class _MovedError(Exception):
    """A booking left the rooms locked for it while its lock was awaited."""


def bookings_lock(
    *, pks: Iterable[int], rooms: Iterable[int] = ()
) -> tuple[dict[int, Room], dict[int, Booking]]:
    """Lock the rooms the bookings ``pks`` are in, with ``rooms`` besides (a change's target),
    in id order, then the bookings; ``({room id: room}, {booking id: booking})``, each booking's
    room set to the locked one. Must run inside a transaction (the locks last until it ends).
    A booking that keeps moving while this waits (``LOCK_TRIES`` times) is a conflict."""
    pks, extra = sorted(set(pks)), set(rooms)
    for _ in range(LOCK_TRIES):
        try:
            with transaction.atomic():
                return _lock_once(pks, extra)
        except _MovedError:
            continue
    raise BookingError(
        "conflict",
        "booking_busy",
        gettext_noop("That booking is being changed by someone else right now."),
        gettext_noop("Look at it again in a moment."),
    )


def _lock_once(pks: list[int], extra: set[int]) -> tuple[dict[int, Room], dict[int, Booking]]:
    room_ids = set(Booking.objects.filter(pk__in=pks).values_list("room_id", flat=True)) | extra
    locked = {
        r.pk: r for r in Room.objects.select_for_update().filter(pk__in=room_ids).order_by("pk")
    }
    found = {
        b.pk: b
        for b in Booking.objects.select_for_update(of=("self",))
        .select_related("requester")
        .filter(pk__in=pks)
        .order_by("pk")
    }
    for booking in found.values():
        if booking.room_id not in locked:
            raise _MovedError
        booking.room = locked[booking.room_id]
    return locked, found


def cancel_stamp(bookings: Iterable[Booking]) -> None:
    """Move the schedule version of each (locked) room the ``bookings`` are in, once per room,
    and stamp each booking's ``cancelled_version`` with its own room's new version. The caller
    saves the bookings; the rooms are saved here."""
    bookings = list(bookings)
    rooms = {b.room.pk: b.room for b in bookings}
    for room in rooms.values():
        room.schedule_version += 1
        room.save(update_fields=["schedule_version"])
    for booking in bookings:
        booking.cancelled_version = rooms[booking.room.pk].schedule_version
