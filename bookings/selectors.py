"""Booking reads."""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.db.models import Exists, Max, Q, Value
from django.utils import timezone
from django.utils.translation import gettext_noop

from accounts.models import Role, User
from accounts.selectors import user_roles
from agentops.contract import read_once
from bookings import rules
from bookings.errors import BookingError
from bookings.models import Booking, BookingChange, BookingStatus, Room
from config import sqlrows

MAX_PAGE = 50
DEFAULT_PAGE = 10


# Hand-written on purpose: the three reads every assistant run makes (the search, the caller's
# own bookings in the window, the receipt the verifier checks) cost 1.6-2.8 ms of CPU each
# through the ORM on the 2-core machine, most of it building the query (the search's two
# subqueries); as prepared statements (their SELECT lists from the models' metadata), ~0.3-0.5 ms
# (bench/README.md, "API reads, and the domain's hot reads"). They read exactly what the querysets they replace
# read (tests/bookings/test_selectors.py holds them to it).
_SEARCH_SQL = """
SELECT {room} FROM bookings_room r
 WHERE r.bookable AND r.capacity >= %(attendees)s AND r.equipment @> %(wanted)s::varchar[]
   AND r.sandbox = EXISTS (
       SELECT 1 FROM accounts_user_groups l JOIN auth_group g ON g.id = l.group_id
        WHERE l.user_id = %(user)s AND g.name = %(sandbox)s)
   AND NOT EXISTS (
       SELECT 1 FROM bookings_booking b
        WHERE b.room_id = r.id AND b.status = %(confirmed)s
          AND b.during && tstzrange(%(start)s, %(end)s, '[)'))
 ORDER BY r.capacity, r.code
"""
_BOOKINGS_SQL = (
    "SELECT {booking}, {room} FROM bookings_booking b JOIN bookings_room r ON r.id = b.room_id"
)
_OVERLAPPING_SQL = (
    " WHERE b.requester_id = %(user)s AND b.status = %(confirmed)s"
    " AND b.during && tstzrange(%(start)s, %(end)s, '[)') ORDER BY b.during, b.id LIMIT %(limit)s"
)
_BY_KEY_SQL = " WHERE b.idempotency_key = %(key)s"


@functools.cache
def _sql(name: str) -> str:
    room, booking = sqlrows.columns(Room, "r"), sqlrows.columns(Booking, "b")
    bookings = _BOOKINGS_SQL.format(booking=booking, room=room)
    return {
        "search": _SEARCH_SQL.format(room=room),
        "overlapping": bookings + _OVERLAPPING_SQL,
        "by_key": bookings + _BY_KEY_SQL,
    }[name]


def _bookings_with_rooms(name: str, params: dict[str, Any]) -> list[Booking]:
    """Bookings of statement ``name``, each with its room loaded (as ``select_related``)."""
    with connection.cursor() as cursor:
        cursor.execute(_sql(name), params)
        rows = cursor.fetchall()
    found = []
    for row in rows:
        booking, booking.room = sqlrows.instances(row, Booking, Room)
        found.append(booking)
    return found


@dataclass(frozen=True)
class RoomAvailability:
    room: Room
    version: int
    observed_at: datetime


def room_search(
    *,
    start_at: datetime,
    end_at: datetime,
    attendees: int,
    equipment: Sequence[str] = (),
    user: User | None = None,
) -> list[RoomAvailability]:
    """Rooms that fit ``attendees`` and ``equipment`` and are free for the whole window,
    smallest first. Each carries the schedule version read in the same statement.

    Sandbox rooms only for a drill identity (role ``sandbox``), and only them: decided in the
    same statement, so a normal search never shows a drill room and a drill never a real one."""
    now = timezone.now()
    rules.check_window(start_at, end_at, now=now)
    rules.check_attendees(attendees)
    wanted = rules.normalize_equipment(equipment)
    with connection.cursor() as cursor:
        cursor.execute(
            _sql("search"),
            {
                "attendees": attendees,
                "wanted": list(wanted),
                "user": user.pk if user is not None else None,
                "sandbox": Role.SANDBOX.value,
                "confirmed": BookingStatus.CONFIRMED.value,
                "start": start_at,
                "end": end_at,
            },
        )
        rooms = [sqlrows.instance(Room, row) for row in cursor.fetchall()]
    return [RoomAvailability(room=r, version=r.schedule_version, observed_at=now) for r in rooms]


def _in_sandbox(user: User | None) -> Exists | Value:
    """Whether ``user`` is a drill identity, as an expression evaluated in the caller's
    statement (no query of its own); no user: the real rooms' side."""
    if user is None:
        return Value(False)
    return Exists(Group.objects.filter(user__pk=user.pk, name=Role.SANDBOX))


# Hand-written: a search that names a room says what stands between the person and it
# (bookings.tools.handlers._named_room): the room on their side of the sandbox line and whether
# the window is free, in one statement where room_get and room_is_free were two ORM reads.
_NAMED_SQL = """
SELECT {room},
       NOT EXISTS (
           SELECT 1 FROM bookings_booking b
            WHERE b.room_id = r.id AND b.status = %(confirmed)s
              AND b.during && tstzrange(%(start)s, %(end)s, '[)')) AS free
  FROM bookings_room r
 WHERE r.code = %(code)s
   AND r.sandbox = EXISTS (
       SELECT 1 FROM accounts_user_groups l JOIN auth_group g ON g.id = l.group_id
        WHERE l.user_id = %(user)s AND g.name = %(sandbox)s)
"""


def room_named(
    *, code: str, user: User | None, start_at: datetime, end_at: datetime
) -> tuple[Room, bool] | None:
    """The room of this code on ``user``'s side of the sandbox line and whether no confirmed
    booking of it overlaps the window (room_get and room_is_free in one statement); None: no
    such room."""
    with connection.cursor() as cursor:
        cursor.execute(
            _named_sql(),
            {
                "code": code,
                "user": user.pk if user is not None else None,
                "sandbox": Role.SANDBOX.value,
                "confirmed": BookingStatus.CONFIRMED.value,
                "start": start_at,
                "end": end_at,
            },
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return sqlrows.instance(Room, row[:-1]), bool(row[-1])


@functools.cache
def _named_sql() -> str:
    return _NAMED_SQL.format(room=sqlrows.columns(Room, "r"))


# Hand-written: what a waiting reservation's recheck reads (bookings.tools.adapters
# .reserve_recheck, before an approver's decision is signed and on every card of the approvals
# inbox): the room, the first confirmed booking that holds the window, and whether a booking in
# the window was made or cancelled after the version the request carries. One statement where
# the ORM's three reads were three round trips, each query built anew.
ROOM_RECHECK_SQL = """
SELECT r.code, r.bookable, r.capacity, r.schedule_version, lower(taken.during),
       upper(taken.during),
       EXISTS (
           SELECT 1 FROM bookings_booking m
            WHERE m.room_id = r.id AND m.during && tstzrange(%(start)s, %(end)s, '[)')
              AND (m.created_version > %(expected)s OR m.cancelled_version > %(expected)s)
              AND m.idempotency_key <> %(key)s) AS moved
  FROM bookings_room r
  LEFT JOIN LATERAL (
       SELECT b.during FROM bookings_booking b
        WHERE b.room_id = r.id AND b.status = %(confirmed)s
          AND b.during && tstzrange(%(start)s, %(end)s, '[)') AND b.idempotency_key <> %(key)s
        ORDER BY b.during
        LIMIT 1) taken ON true
 WHERE r.code = %(code)s
"""


@dataclass(frozen=True)
class RoomRecheck:
    code: str
    bookable: bool
    capacity: int
    schedule_version: int
    taken: tuple[datetime, datetime] | None  # the first confirmed booking holding the window
    moved: bool  # a booking in the window was made or cancelled after the expected version


def room_recheck(
    *, code: str, start_at: datetime, end_at: datetime, key: str, expected: int
) -> RoomRecheck | None:
    """The room's state for a reservation of the window under ``key`` that read the room's
    schedule at version ``expected`` (ROOM_RECHECK_SQL): bookings under ``key`` itself are not
    in the way. None: no such room."""
    with connection.cursor() as cursor:
        cursor.execute(
            ROOM_RECHECK_SQL,
            {
                "code": code,
                "start": start_at,
                "end": end_at,
                "key": key,
                "expected": expected,
                "confirmed": BookingStatus.CONFIRMED.value,
            },
        )
        row = cursor.fetchone()
    if row is None:
        return None
    code, bookable, capacity, version, lower, upper, moved = row
    taken = (lower, upper) if lower is not None else None
    return RoomRecheck(code, bookable, capacity, version, taken, bool(moved))


# The one rule for "is this window still as it was" (DESIGN.md, "A window is the unit of
# truth"): a window's version is the newest schedule version written by a booking of that room
# that overlaps it (made there, or cancelled there), 0 for a window nobody ever touched. A
# reservation that read the room at version V is fresh while its window's version is <= V
# (booking_reserve's statement, booking_change, the inbox's recheck), and an approval binds the
# window's version, not the room's: a booking on another day of the same room changes neither.
# One index probe per window (the exclusion constraint's GiST index on room and time).
WINDOW_VERSION_SQL = """
SELECT r.id,
       COALESCE((SELECT max(GREATEST(b.created_version, COALESCE(b.cancelled_version, 0)))
                   FROM unnest(%(starts)s::timestamptz[], %(ends)s::timestamptz[]) w(s, e)
                   JOIN bookings_booking b
                     ON b.room_id = r.id AND b.during && tstzrange(w.s, w.e, '[)')
                  WHERE b.code <> %(exclude)s), 0)
  FROM bookings_room r
 WHERE r.code = %(code)s
"""


def room_window_version(
    *, code: str, windows: Sequence[tuple[datetime, datetime]], exclude: str = ""
) -> int | None:
    """The version of the room's schedule in these windows (WINDOW_VERSION_SQL); the booking
    ``exclude`` (one being changed) does not count. None: no such room."""
    with connection.cursor() as cursor:
        cursor.execute(
            WINDOW_VERSION_SQL,
            {
                "code": code,
                "starts": [w[0] for w in windows],
                "ends": [w[1] for w in windows],
                "exclude": exclude,
            },
        )
        row = cursor.fetchone()
    return row[1] if row is not None else None


def room_get(*, code: str, user: User | None = None) -> Room | None:
    """The room of this code on ``user``'s side of the sandbox line (None: no such room)."""
    return Room.objects.filter(code=code, sandbox=_in_sandbox(user)).first()


def room_largest_capacity(*, user: User | None = None) -> int | None:
    """How many people the largest bookable room seats (None: no bookable room), on
    ``user``'s side of the sandbox line."""
    rooms = Room.objects.filter(bookable=True, sandbox=_in_sandbox(user))
    return rooms.aggregate(largest=Max("capacity"))["largest"]


def booking_list_overlapping(
    *, user: User, start_at: datetime, end_at: datetime, limit: int = 5
) -> list[Booking]:
    """The user's confirmed bookings (any room) that overlap the window, earliest first."""
    return _bookings_with_rooms(
        "overlapping",
        {
            "user": user.pk,
            "confirmed": BookingStatus.CONFIRMED.value,
            "start": start_at,
            "end": end_at,
            "limit": limit,
        },
    )


# Hand-written: the room facts a call's checks read, in one statement (the gate's risk, an
# approval's binding and summary each read some of them). Within the runtime's checks of one
# call (agentops.contract.call_reads) the row is read once for all of them.
ROOM_STATE_SQL = """
SELECT id, name, requires_approval, department, capacity, bookable, schedule_version
  FROM bookings_room WHERE code = %s
"""


@dataclass(frozen=True)
class RoomState:
    id: int
    name: str
    requires_approval: bool
    department: str
    capacity: int
    bookable: bool
    schedule_version: int


def room_state(*, code: str) -> RoomState | None:
    """The room's facts now (ROOM_STATE_SQL; None: no such room), read once per call's checks."""

    def load() -> RoomState | None:
        with connection.cursor() as cursor:
            cursor.execute(ROOM_STATE_SQL, [code])
            row = cursor.fetchone()
        return RoomState(*row) if row is not None else None

    return read_once(("bookings.room_state", code), load)


def room_policy_facts(*, code: str) -> tuple[bool, str] | None:
    """(requires_approval, department) of a room, or None: what the risk policy reads."""
    state = room_state(code=code)
    return (state.requires_approval, state.department) if state is not None else None


def room_facts(*, code: str) -> dict[str, object] | None:
    """What the policy and the write depend on for a room: approval flag, department, capacity,
    bookable (None: no such room)."""
    state = room_state(code=code)
    if state is None:
        return None
    return {
        "requires_approval": state.requires_approval,
        "department": state.department,
        "capacity": state.capacity,
        "bookable": state.bookable,
    }


def room_schedule_version(*, code: str) -> int | None:
    """The room's schedule version now (None: no such room)."""
    state = room_state(code=code)
    return state.schedule_version if state is not None else None


def booking_get(*, user: User, code: str) -> Booking:
    """A booking its requester (or an admin) may see; anyone else gets not_found."""
    booking = Booking.objects.select_related("room", "requester").filter(code=code).first()
    if booking is None or (
        booking.requester_id != user.pk and Role.ADMIN not in user_roles(user=user)
    ):
        raise BookingError(
            "not_found", "booking_not_found", f"There is no booking {code} of yours."
        )
    return booking


def booking_get_by_key(*, idempotency_key: str) -> Booking | None:
    """The booking created under this idempotency key, if any (no waiting)."""
    found = _bookings_with_rooms("by_key", {"key": idempotency_key})
    return found[0] if found else None


def booking_lookup_receipt(*, idempotency_key: str) -> Booking | None:
    """What happened to this key, after any in-flight write of it has committed or aborted.

    Takes the key's advisory lock (the one booking_reserve holds until commit), so None
    proves that no write of this key has committed so far.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [idempotency_key])
        return booking_get_by_key(idempotency_key=idempotency_key)


CANCEL_LOOKUP_WAIT_MS = 2000


def booking_lookup_cancel(*, idempotency_key: str) -> Booking | None:
    """The booking a cancel under this key cancelled, after any in-flight cancel of the key has
    committed or aborted (booking_cancel holds the key's advisory lock until commit): None
    proves that no cancel of this key has committed so far."""
    with transaction.atomic(), connection.cursor() as cursor:
        # A cancel holds its key for milliseconds; one that holds it longer is stuck somewhere,
        # and "unknown" (raised as OperationalError) is the honest answer, not a hung worker.
        cursor.execute(
            "SELECT set_config('lock_timeout', %s, true)", [f"{CANCEL_LOOKUP_WAIT_MS}ms"]
        )
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [idempotency_key])
        return Booking.objects.select_related("room").filter(cancel_key=idempotency_key).first()


@dataclass(frozen=True)
class BookingPage:
    items: list[Booking]
    next_cursor: str | None
    has_more: bool


def room_cursor_encode(capacity: int, code: str) -> str:
    """A search page's next_cursor: the last room listed, in the search's order."""
    raw = json.dumps({"after": [capacity, code]}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def room_cursor_decode(cursor: str) -> tuple[int, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        capacity, code = json.loads(base64.urlsafe_b64decode(padded.encode()))["after"]
        if not isinstance(capacity, int) or not isinstance(code, str):
            raise TypeError(cursor)
    except (ValueError, KeyError, TypeError) as exc:
        raise BookingError(
            "invalid_input",
            "bad_cursor",
            "The cursor is not one this service issued.",
            "Pass next_cursor from the previous page unchanged.",
        ) from exc
    return capacity, code


def _encode_cursor(booking_id: int) -> str:
    return (
        base64.urlsafe_b64encode(json.dumps({"before": booking_id}).encode()).decode().rstrip("=")
    )


def _decode_cursor(cursor: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))["before"]
    except (ValueError, KeyError, TypeError) as exc:
        raise BookingError(
            "invalid_input",
            "bad_cursor",
            "The cursor is not one this service issued.",
            "Pass next_cursor from the previous page unchanged.",
        ) from exc
    if not isinstance(value, int):
        raise BookingError(
            "invalid_input", "bad_cursor", "The cursor is not one this service issued."
        )
    return value


def booking_cursor_encode(booking_id: int) -> str:
    """A list page's next_cursor: the last booking listed (the list is newest first by id)."""
    return _encode_cursor(booking_id)


def booking_list_for_user(
    *,
    user: User,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
    upcoming_only: bool = False,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> BookingPage:
    """The user's bookings, newest first, a page at a time (keyset on id). With ``start_at``
    and/or ``end_at`` (aware), only those overlapping that window, either end open: ending
    after ``start_at``, starting before ``end_at``."""
    if not isinstance(limit, int) or limit < 1 or limit > MAX_PAGE:
        raise BookingError("invalid_input", "bad_limit", f"limit must be 1 to {MAX_PAGE}.")
    _check_list_window(start_at, end_at)
    qs = Booking.objects.select_related("room").filter(requester=user).order_by("-id")
    if upcoming_only:
        qs = qs.filter(Q(during__endswith__gt=timezone.now()))
    if start_at is not None:
        qs = qs.filter(during__endswith__gt=start_at)
    if end_at is not None:
        qs = qs.filter(during__startswith__lt=end_at)
    if cursor:
        qs = qs.filter(id__lt=_decode_cursor(cursor))
    rows = list(qs[: limit + 1])
    has_more = len(rows) > limit
    items = rows[:limit]
    return BookingPage(
        items=items,
        next_cursor=_encode_cursor(items[-1].id) if has_more else None,
        has_more=has_more,
    )


def booking_list_all(
    *, user: User, start_at: datetime | None = None, end_at: datetime | None = None
) -> list[Booking]:
    """Every booking of the user overlapping the window (as booking_list_for_user), newest
    first: all pages read, for a caller in the process that must decide from the whole set."""
    found: list[Booking] = []
    cursor = None
    while True:
        page = booking_list_for_user(
            user=user, limit=MAX_PAGE, cursor=cursor, start_at=start_at, end_at=end_at
        )
        found += page.items
        if not page.has_more:
            return found
        cursor = page.next_cursor


def _check_list_window(start_at: datetime | None, end_at: datetime | None) -> None:
    for value in (start_at, end_at):
        if value is not None and (value.tzinfo is None or value.utcoffset() is None):
            raise BookingError(
                "invalid_input",
                "naive_datetime",
                gettext_noop("A time of the window has no UTC offset."),
                gettext_noop("Send ISO 8601 with an offset, e.g. 2026-09-28T14:00:00+08:00."),
            )
    if start_at is not None and end_at is not None and end_at <= start_at:
        raise BookingError(
            "invalid_input",
            "bad_window",
            gettext_noop("The window's end must be after its start."),
            gettext_noop("Swap or correct from and to."),
        )


def booking_lookup_change(*, idempotency_key: str) -> BookingChange | None:
    """The change made under this key, after any in-flight change of the key has committed or
    aborted (booking_change holds the key's advisory lock until commit): None proves that no
    change of this key has committed so far."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('lock_timeout', %s, true)", [f"{CANCEL_LOOKUP_WAIT_MS}ms"]
        )
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [idempotency_key])
        return (
            BookingChange.objects.select_related("booking", "from_room", "to_room")
            .filter(idempotency_key=idempotency_key)
            .first()
        )


def booking_room_code(*, code: str) -> str | None:
    """The room code of booking ``code`` (None: no such booking)."""
    return Booking.objects.filter(code=code).values_list("room__code", flat=True).first()


# Hand-written on purpose: the assistant reads the room catalogue at the start of a run and at
# each of its planning steps (four times per two-call run). Through the ORM (a filtered, ordered
# ``values_list``) it was 8.7% of the worker's CPU in a py-spy profile of 16-run batches, nearly
# all of it building the query; as a prepared statement it costs the round trip
# (bench/README.md, "what each change bought"). tests/bookings/test_selectors.py holds it to the
# queryset it replaced.
_ROOM_NAMES_SQL = "SELECT code, name, bookable FROM bookings_room WHERE NOT sandbox ORDER BY code"


def room_names() -> list[tuple[str, str, bool]]:
    """(code, name, bookable) of every real room (not the drills' sandbox rooms), by code: what
    the assistant matches room names against. One small query; callers read it once per
    request."""
    with connection.cursor() as cursor:
        cursor.execute(_ROOM_NAMES_SQL)
        return [(code, name, bookable) for code, name, bookable in cursor.fetchall()]


def room_choices(*, user: User) -> list[tuple[str, str]]:
    """(code, "code name") of every bookable room on ``user``'s side of the sandbox line."""
    rooms = Room.objects.filter(bookable=True, sandbox=_in_sandbox(user)).order_by("code")
    return [(r.code, f"{r.code} {r.name}") for r in rooms.only("code", "name")]
