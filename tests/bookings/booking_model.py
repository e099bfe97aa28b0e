"""The model of tests/bookings/test_state_machine.py: what the booking engine should hold after
any sequence of writes, as a few dictionaries, and the rules that predict each answer.

Freshness is modelled as DESIGN.md states it ("a window is the unit of truth"): every write
notes the windows it changed (``touch``); an observation or a request made at tick T is still
good for a window no write has touched since T, whatever happened elsewhere in the room."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

CHECKIN_OPENS = timedelta(minutes=10)  # BOOKING_CHECKIN_OPEN_MINUTES
CHECKIN_GRACE = timedelta(minutes=15)  # BOOKING_CHECKIN_GRACE_MINUTES
SERIES_MISSED = 3  # BOOKING_SERIES_MISSED_CHECKINS


@dataclass(frozen=True, order=True)
class Span:
    start: datetime
    end: datetime

    def meets(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end


def overlaps(a: Span, b: Span) -> bool:
    return a.meets(b)


@dataclass(frozen=True)
class RoomSpec:
    capacity: int
    premium: bool = False  # requires_approval: every booking of it waits for an approver
    checkin: bool = True


ROOMS = {
    "R1": RoomSpec(capacity=2),
    "R2": RoomSpec(capacity=6),
    "R3": RoomSpec(capacity=6, checkin=False),
    "R4": RoomSpec(capacity=16, premium=True),
    # The race rooms: only the race rules book them (their bookings end each step cancelled).
    "R5": RoomSpec(capacity=6),
    "R6": RoomSpec(capacity=6),
}
RACE_ROOMS = ("R5", "R6")
RACE_FROM = "R5"
PEOPLE = ("p1", "p2", "p3")
RACER = "p3"


@dataclass(frozen=True)
class Observation:
    """A room a search listed free for ``span``, with its version, at model time ``tick``."""

    room: str
    span: Span
    version: int
    tick: int


@dataclass
class MBooking:
    owner: str
    room: str
    span: Span
    attendees: int
    confirmed: bool = True
    series: int | None = None
    checked_in: bool = False

    def where(self) -> tuple[str, Span]:
        return self.room, self.span


@dataclass
class MSeries:
    owner: str
    room: str
    codes: list[str]
    missed: int = 0
    released: bool = False


@dataclass
class Pending:
    """A write waiting for an approver: what it asks for, and the model time its freshness
    dates from (the observation it carries, or the request)."""

    kind: str  # reserve | series | change
    owner: str
    room: str
    spans: list[Span]
    tick: int
    attendees: int = 1
    mode: str = "all"  # series
    booking: str = ""  # change: the booking it moves
    booking_was: tuple | None = None  # change: (room, span, confirmed) when requested
    request_id: object = None
    action_ref: str = ""


# What a write's answer names as the thing it made or changed.
IDENTITY = {
    "reserve_room": "booking_id",
    "change_booking": "booking_id",
    "cancel_booking": "booking_id",
    "reserve_series": "series_id",
    "cancel_series": "series_id",
}


@dataclass
class Call:
    """A governed write as sent, for sending it again under the same key."""

    person: str
    tool: str
    arguments: dict
    key: str
    made: object = None  # what it made or changed (IDENTITY), once it did
    action_ref: str = ""  # the action that waited for an approver, if it did


@dataclass
class Model:
    clock: datetime  # the check-in and release clock (never goes back)
    bookings: dict[str, MBooking] = field(default_factory=dict)
    series: dict[int, MSeries] = field(default_factory=dict)
    pending: dict[object, Pending] = field(default_factory=dict)
    seen: list[Observation] = field(default_factory=list)  # what searches listed, in order
    calls: list[Call] = field(default_factory=list)  # writes that did something or wait
    tick: int = 0
    touches: list[tuple[int, str, Span]] = field(default_factory=list)

    # --- windows --------------------------------------------------------------------------

    def touch(self, room: str, span: Span) -> None:
        self.tick += 1
        self.touches.append((self.tick, room, span))

    def untouched(self, room: str, spans: list[Span], *, since: int) -> bool:
        return not any(
            tick > since and r == room and any(s.meets(w) for w in spans)
            for tick, r, s in self.touches
        )

    def busy(self, room: str, span: Span, *, besides: str = "") -> bool:
        return any(
            b.confirmed and b.room == room and b.span.meets(span) and code != besides
            for code, b in self.bookings.items()
        )

    def free_rooms(self, span: Span, attendees: int) -> list[str]:
        return sorted(
            code
            for code, spec in ROOMS.items()
            if spec.capacity >= attendees and not self.busy(code, span)
        )

    # --- writes ---------------------------------------------------------------------------

    def add(
        self,
        code: str,
        owner: str,
        room: str,
        span: Span,
        attendees: int,
        series: int | None = None,
    ) -> None:
        assert code not in self.bookings, code
        self.bookings[code] = MBooking(owner, room, span, attendees, series=series)

    def cancel(self, code: str) -> None:
        self.bookings[code].confirmed = False

    def change(self, code: str, room: str, span: Span, attendees: int) -> None:
        booking = self.bookings[code]
        booking.room, booking.span, booking.attendees = room, span, attendees

    def add_series(self, series_id: int, owner: str, room: str, codes: list[str]) -> None:
        self.series[series_id] = MSeries(owner, room, codes)

    def series_targets(self, series_id: int, anchor: str | None) -> list[str]:
        """What cancel_series cancels: the series' confirmed meetings from the anchor's start
        on (every one when there is no anchor: none of them has begun)."""
        series = self.series[series_id]
        start = self.bookings[anchor].span.start if anchor else None
        return sorted(
            (c for c in series.codes if self.bookings[c].confirmed)
            if start is None
            else (
                c
                for c in series.codes
                if self.bookings[c].confirmed and self.bookings[c].span.start >= start
            )
        )

    # --- approvals ------------------------------------------------------------------------

    def could_execute(self, p: Pending) -> bool:
        """Whether the write's own rules allow it now (the exclusion constraint's view)."""
        if p.kind == "reserve":
            return not self.busy(p.room, p.spans[0])
        if p.kind == "series":
            free = [not self.busy(p.room, s) for s in p.spans]
            return all(free) if p.mode == "all" else any(free)
        booking = self.bookings[p.booking]
        return booking.confirmed and not self.busy(p.room, p.spans[0], besides=p.booking)

    def must_execute(self, p: Pending) -> bool:
        """DESIGN.md: every approval of a window still free executes. Free, and untouched since
        the request (or the observation it carries); a change's booking as it was then."""
        if not self.could_execute(p) or not self.untouched(p.room, p.spans, since=p.tick):
            return False
        if p.kind == "change":
            booking = self.bookings[p.booking]
            return (booking.room, booking.span, booking.confirmed) == p.booking_was
        return True

    # --- check-in and release -------------------------------------------------------------

    def checkin_refusal(self, code: str, now: datetime) -> str | None:
        booking = self.bookings[code]
        if booking.checked_in:
            return None  # checking in twice returns the booking unchanged
        if not booking.confirmed:
            return "checkin_cancelled"
        if not ROOMS[booking.room].checkin:
            return "checkin_not_needed"
        if now < booking.span.start - CHECKIN_OPENS:
            return "checkin_too_early"
        if now >= booking.span.start + CHECKIN_GRACE:
            return "checkin_too_late"
        return None

    def check_in(self, code: str) -> None:
        booking = self.bookings[code]
        booking.checked_in = True
        if booking.series is not None:
            self.series[booking.series].missed = 0

    def release(self, now: datetime) -> list[tuple[str, tuple[str, Span]]]:
        """The no-show sweep: (code, (room, span)) of each booking it cancels, in its order."""
        due = sorted(
            (b.span, code)
            for code, b in self.bookings.items()
            if b.confirmed
            and not b.checked_in
            and ROOMS[b.room].checkin
            and b.span.start + CHECKIN_GRACE <= now
        )
        released: list[tuple[str, tuple[str, Span]]] = []
        for _, code in due:
            booking = self.bookings[code]
            if not booking.confirmed:
                continue  # released with its series a moment ago
            booking.confirmed = False
            released.append((code, (booking.room, booking.span)))
            if booking.series is None:
                continue
            series = self.series[booking.series]
            series.missed += 1
            if series.missed >= SERIES_MISSED and not series.released:
                series.released = True
                for other in sorted(series.codes, key=lambda c: self.bookings[c].span):
                    later = self.bookings[other]
                    if later.confirmed and later.span.start > booking.span.start:
                        later.confirmed = False
                        released.append((other, (later.room, later.span)))
        return released

    # --- reads ----------------------------------------------------------------------------

    def listing(self, person: str) -> list[tuple[str, str]]:
        return sorted(
            (code, "confirmed" if b.confirmed else "cancelled")
            for code, b in self.bookings.items()
            if b.owner == person
        )

    def confirmed_codes(self) -> list[str]:
        return [code for code, b in self.bookings.items() if b.confirmed]  # in order of making
