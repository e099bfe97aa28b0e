"""Reads of the day view: rooms by the hours of a day, one room's week, and the nearest free
times when a slot is taken. Another person's booking is only "busy" here: its cell carries no
booking at all, so no template can show whose it is or what it is called."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone
from django.utils.translation import gettext_noop

from accounts.models import User
from bookings import rules
from bookings.errors import BookingError
from bookings.models import Booking, BookingStatus, Room
from bookings.selectors import _in_sandbox, booking_list_overlapping, room_search

DAY_START, DAY_END = time(8), time(20)
STEP = timedelta(minutes=30)
WEEK = 7
ALTERNATIVES = 3


class CellState:
    FREE, MINE, BUSY, PAST = "free", "mine", "busy", "past"


@dataclass
class Cell:
    start: datetime
    end: datetime
    state: str
    span: int = 1
    booking: Booking | None = None  # only the person's own
    source: int | None = field(default=None, repr=False)  # the booking's row, to merge cells

    @property
    def dom_id(self) -> str:
        return f"{timezone.localtime(self.start):%Y%m%d-%H%M}"


@dataclass
class Row:
    room: Room
    day: date
    cells: list[Cell]
    approval: list[tuple[str, dict[str, object]]] = field(default_factory=list)


@dataclass(frozen=True)
class Filters:
    attendees: int = 1
    equipment: Sequence[str] = ()
    floor: int | None = None
    department: str = ""


def _zone() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def day_bounds(day: date) -> tuple[datetime, datetime]:
    tz = _zone()
    return datetime.combine(day, DAY_START, tzinfo=tz), datetime.combine(day, DAY_END, tzinfo=tz)


def hours(day: date) -> list[datetime]:
    """The grid's column heads: every full hour of the bookable day."""
    start, end = day_bounds(day)
    return [start + timedelta(hours=i) for i in range(int((end - start) / timedelta(hours=1)))]


def _rooms(*, user: User, filters: Filters) -> list[Room]:
    wanted = rules.normalize_equipment(filters.equipment)
    rules.check_attendees(filters.attendees)
    rooms = Room.objects.filter(
        bookable=True,
        capacity__gte=filters.attendees,
        equipment__contains=wanted,
        sandbox=_in_sandbox(user),
    )
    if filters.floor is not None:
        rooms = rooms.filter(floor=filters.floor)
    if filters.department:
        rooms = rooms.filter(department=filters.department)
    return list(rooms.order_by("floor", "code"))


def _bookings(rooms: list[Room], start: datetime, end: datetime) -> list[Booking]:
    return list(
        Booking.objects.filter(
            room__in=rooms,
            status=BookingStatus.CONFIRMED,
            during__overlap=DateTimeTZRange(start, end, "[)"),
        )
        .only("id", "code", "room_id", "requester_id", "during", "title", "attendees")
        .order_by("during")
    )


def _cells(*, user: User, day: date, bookings: list[Booking], now: datetime) -> list[Cell]:
    start, end = day_bounds(day)
    cells: list[Cell] = []
    at = start
    while at < end:
        nxt = at + STEP
        hit = next((b for b in bookings if b.start_at < nxt and b.end_at > at), None)
        if hit is not None:
            mine = hit.requester_id == user.pk
            if cells and cells[-1].source == hit.pk:
                cells[-1].span += 1
                cells[-1].end = nxt
            else:
                state = CellState.MINE if mine else CellState.BUSY
                cells.append(Cell(at, nxt, state, 1, hit if mine else None, hit.pk))
        else:
            cells.append(Cell(at, nxt, CellState.PAST if nxt <= now else CellState.FREE))
        at = nxt
    return cells


def schedule_day(*, user: User, day: date, filters: Filters) -> list[Row]:
    """Each room that fits the filters, its day in STEP cells from DAY_START to DAY_END."""
    rooms = _rooms(user=user, filters=filters)
    start, end = day_bounds(day)
    found = _bookings(rooms, start, end)
    now = timezone.now()
    dept = getattr(user, "department", "")
    return [
        Row(
            room=room,
            day=day,
            cells=_cells(
                user=user, day=day, bookings=[b for b in found if b.room_id == room.pk], now=now
            ),
            approval=room_approval(room=room, user_department=dept),
        )
        for room in rooms
    ]


def schedule_room_week(*, user: User, room: Room, first: date) -> list[Row]:
    """One room's days from ``first``, WEEK of them."""
    start, _ = day_bounds(first)
    _, end = day_bounds(first + timedelta(days=WEEK - 1))
    found = _bookings([room], start, end)
    now = timezone.now()
    approval = room_approval(room=room, user_department=getattr(user, "department", ""))
    days = [first + timedelta(days=i) for i in range(WEEK)]
    return [
        Row(
            room=room,
            day=d,
            cells=_cells(user=user, day=d, bookings=found, now=now),
            approval=approval,
        )
        for d in days
    ]


def room_approval(*, room: Room, user_department: str) -> list[tuple[str, dict[str, object]]]:
    """Why booking this room waits for an approver (empty: it does not)."""
    return rules.approval_reasons(
        room_code=room.code,
        requires_approval=room.requires_approval,
        department=room.department,
        user_department=user_department,
    )


def room_floors(*, user: User) -> list[int]:
    rooms = Room.objects.filter(bookable=True, sandbox=_in_sandbox(user))
    return sorted(set(rooms.values_list("floor", flat=True)))


@dataclass(frozen=True)
class Alternatives:
    same_room: list[tuple[datetime, datetime]]
    other_rooms: list[Room]


def free_alternatives(
    *, user: User, room_code: str, start_at: datetime, end_at: datetime, attendees: int
) -> Alternatives:
    """The nearest free windows of the same length in the same room that day, and other rooms
    free for the same window: what a person who lost a slot can take instead."""
    room = Room.objects.filter(code=room_code, sandbox=_in_sandbox(user)).first()
    length = end_at - start_at
    same: list[tuple[datetime, datetime]] = []
    now = timezone.now()
    if room is not None and length > timedelta(0):
        day = timezone.localtime(start_at).date()
        lo, hi = day_bounds(day)
        taken = _bookings([room], lo, hi)
        candidates = []
        at = lo
        while at + length <= hi:
            if (
                at >= now
                and at != start_at
                and not any(b.start_at < at + length and b.end_at > at for b in taken)
            ):
                candidates.append((abs(at - start_at), at))
            at += STEP
        same = [(at, at + length) for _, at in sorted(candidates)[:ALTERNATIVES]]
        same.sort()
    try:
        others = [
            a.room
            for a in room_search(start_at=start_at, end_at=end_at, attendees=attendees, user=user)
            if a.room.code != room_code
        ][:ALTERNATIVES]
    except BookingError:
        others = []
    return Alternatives(same_room=same, other_rooms=others)


@dataclass(frozen=True)
class Slot:
    """A free span the person picked, as the booking form offers it."""

    room: Room
    start: datetime
    ends: list[datetime]  # the end times offered, up to the next booking or the day's end
    attendees: int
    equipment: tuple[str, ...]
    approval: list[tuple[str, dict[str, object]]]
    held: list[Booking]  # the person's own bookings at that time (a second room asks first)


SLOT_MAX = timedelta(hours=4)


def slot_choice(
    *, user: User, room_code: str, start: str, attendees: str, equipment: Sequence[str]
) -> Slot:
    """The booking form of a grid cell: ``start`` as the grid sent it (ISO 8601)."""
    room = Room.objects.filter(code=room_code, bookable=True, sandbox=_in_sandbox(user)).first()
    try:
        at = datetime.fromisoformat(start)
        people = int(attendees)
    except ValueError:
        at, people = None, 0
    if room is None or at is None or at.tzinfo is None or people < 1:
        raise BookingError(
            "invalid_input",
            "bad_slot",
            gettext_noop("That time cannot be booked from here."),
            gettext_noop("Pick a free time on the grid."),
        )
    wanted = tuple(rules.normalize_equipment(equipment))
    day = timezone.localtime(at).date()
    _, day_end = day_bounds(day)
    later = _bookings([room], at, day_end)
    limit = min([day_end, at + SLOT_MAX] + [b.start_at for b in later if b.start_at > at])
    if any(b.start_at <= at < b.end_at for b in later) or at < timezone.now():
        raise BookingError(
            "conflict",
            "slot_taken",
            gettext_noop("Someone booked %(room)s for that time a moment ago."),
            gettext_noop("Pick another free time."),
            params={"room": room.code},
        )
    ends = []
    end = at + STEP
    while end <= limit:
        ends.append(end)
        end += STEP
    return Slot(
        room=room,
        start=at,
        ends=ends,
        attendees=people,
        equipment=wanted,
        approval=room_approval(room=room, user_department=getattr(user, "department", "")),
        held=booking_list_overlapping(user=user, start_at=at, end_at=ends[min(1, len(ends) - 1)]),
    )


def change_initial(booking: Booking) -> dict[str, object]:
    """The change form's initial values: the booking as it is."""
    start, end = timezone.localtime(booking.start_at), timezone.localtime(booking.end_at)
    return {
        "room": booking.room.code,
        "date": start.date(),
        "start": start.time(),
        "end": end.time(),
        "attendees": booking.attendees,
        "title": booking.title,
    }


def rooms_for(*, user: User) -> list[Room]:
    """Bookable rooms on the person's side of the sandbox line, for the change form."""
    return list(Room.objects.filter(bookable=True, sandbox=_in_sandbox(user)).order_by("code"))
