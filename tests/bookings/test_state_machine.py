"""The booking state machine as a model (DESIGN.md, "Invariants the engine keeps in every
sequence"): random sequences of reserve, change (across rooms), cancel, series, cancel-series,
approve, reject, retries, check-in, release and concurrent writes, over four rooms (two more
for the races) and three people, through the governed front door (the runtime's gate,
approvals and recorder: what every channel uses) and the booking services the beat and the
check-in screen call.

The model is a few dictionaries (tests/bookings/booking_model.py): bookings by code, series,
waiting approvals, and which windows of which room were written when. After every step:

- no two confirmed bookings of one room overlap, and the database holds exactly the model;
- a window the search shows free can be reserved with the version the search returned;
- every approval of a window still untouched executes (checked in the approve rule);
- list_my_bookings paged to the end lists exactly the person's bookings;
- every answer agrees with the database (checked in each rule).

Size: BOOKING_MODEL_EXAMPLES sequences of at most BOOKING_MODEL_STEPS steps (``make test`` runs
the defaults, ``make soak`` a large run); a failure prints the shrunk sequence.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection, transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agentops.models import Action
from agentops.runtime.redis_client import get_redis
from agentops.services import tool_call_governed
from approvals.hooks import request_outcomes
from approvals.models import ApprovalRequest
from approvals.selectors import approval_card
from approvals.services import approval_decide
from bookings.checkin import booking_check_in, bookings_release_no_shows
from bookings.errors import BookingError
from bookings.models import Booking, BookingSeries, Room
from bookings.selectors import room_search
from bookings.services import booking_reserve
from config.celery import app
from tests.accounts.factories import APPROVERS, EMPLOYEES, user_create
from tests.bookings.booking_model import (
    CHECKIN_GRACE,
    CHECKIN_OPENS,
    IDENTITY,
    PEOPLE,
    RACE_FROM,
    RACE_ROOMS,
    RACER,
    ROOMS,
    SERIES_MISSED,
    Call,
    Model,
    Observation,
    Pending,
    Span,
)
from tests.conftest import SHANGHAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

EXAMPLES = int(os.environ.get("BOOKING_MODEL_EXAMPLES", "20"))
STEPS = int(os.environ.get("BOOKING_MODEL_STEPS", "30"))

# Nothing here is transient: no fault is injected, so a yellow answer (a crash, an open circuit,
# a timeout) or an unknown outcome is a failure of the engine, never a result to model.
PENDING = "approval_pending"
PAGE_SIZES = (50, 50, 10, 3)
JOIN_TIMEOUT = 60

# --- what a step draws ----------------------------------------------------------------------

people = st.sampled_from(PEOPLE)
# The premium room twice: a reservation waits for an approver often enough to approve some.
room_codes = st.sampled_from(["R1", "R2", "R3", "R4", "R4"])
# (day, half-hour slot from 09:00, minutes): few enough that windows meet often.
windows = st.tuples(st.integers(0, 2), st.integers(0, 6), st.sampled_from([30, 60, 90]))
head_counts = st.sampled_from([1, 2, 3])


def _envelope_sane(envelope: dict[str, Any]) -> None:
    """No fault is injected: every answer is green, red, or a wait for an approver."""
    assert (
        envelope.get("ok") or envelope.get("signal") == "red" or envelope.get("code") == PENDING
    ), (
        f"a {envelope.get('signal')} answer with no fault injected: {envelope.get('code')}: "
        f"{envelope.get('message')}"
    )


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value)


def counted(rule_fn):
    """Count the rule's runs in the machine's tally (reported at the end of the session)."""

    @functools.wraps(rule_fn)
    def run(self, **kwargs):
        self.tally[rule_fn.__name__] += 1
        return rule_fn(self, **kwargs)

    return run


class BookingMachine(RuleBasedStateMachine):
    """One example: a clean database (the rows of the last example deleted, the runtime's
    circuits and rate windows in Redis forgotten), four rooms, three employees and an approver
    who live for the whole test."""

    # Set by the test function before the machine runs.
    users: dict[str, Any]
    approver: Any
    base: datetime
    clear: str
    tally: Counter  # what the whole test did: examples, steps, rules run, outcomes
    last_call: Call

    def __init__(self) -> None:
        super().__init__()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(self.clear)
        _forget_runtime_counters()
        for code, spec in ROOMS.items():
            Room.objects.create(
                code=code,
                name=f"Room {code}",
                capacity=spec.capacity,
                department="Engineering",
                requires_approval=spec.premium,
                checkin_required=spec.checkin,
            )
        self.model = Model(clock=datetime.now(SHANGHAI))
        self.tally["examples"] += 1
        self.recent: list[tuple[str, datetime, datetime]] = []  # windows the last step wrote
        self.dirty: set[str] = set()  # people whose bookings the last step touched

    # --- helpers ------------------------------------------------------------------------------

    def span(self, window: tuple[int, int, int], day_shift: int = 0) -> Span:
        day, slot, minutes = window
        start = self.base + timedelta(days=day + day_shift, hours=9, minutes=30 * slot)
        return Span(start, start + timedelta(minutes=minutes))

    def call(self, person: str, tool: str, arguments: dict[str, Any], key: str = "") -> dict:
        """A governed call on the booking screen's channel, under a fresh key unless ``key``
        (a retry); remembered as ``last_call`` for ``remember``."""
        key = key or uuid.uuid4().hex
        envelope = tool_call_governed(
            user=self.users[person],
            name=tool,
            arguments=arguments,
            idempotency_key=key,
            channel="web",
        )
        _envelope_sane(envelope)
        self.last_call = Call(person, tool, arguments, key)
        return envelope

    def remember(self, envelope: dict) -> None:
        """Keep the last write for a retry under its key: what it did (green) or the approval
        it waits for."""
        call = self.last_call
        if envelope.get("code") == PENDING:
            call.action_ref = envelope["pending"]["action_id"]
        else:
            call.made = envelope["data"][IDENTITY[call.tool]]
        self.model.calls.append(call)

    def wrote(self, person: str, room: str, span: Span) -> None:
        self.model.touch(room, span)
        self.recent.append((room, span.start, span.end))
        self.dirty.add(person)

    def search(self, person: str, span: Span, attendees: int) -> dict[str, int]:
        """find_available_rooms through the door; its rooms are the model's free rooms that
        fit. Returns each listed room's version."""
        envelope = self.call(
            person,
            "find_available_rooms",
            {
                "start_at": span.start.isoformat(),
                "end_at": span.end.isoformat(),
                "attendees": attendees,
                "limit": 50,
            },
        )
        assert envelope["ok"], envelope
        listed = {r["room_id"]: r["version"] for r in envelope["data"]["rooms"]}
        assert sorted(listed) == self.model.free_rooms(span, attendees), (span, envelope)
        assert not envelope["data"]["has_more"]
        return listed

    def pending_opened(self, person: str, envelope: dict, pending: Pending) -> None:
        action_ref = envelope["pending"]["action_id"]
        request = ApprovalRequest.objects.get(action_ref=action_ref, status="pending")
        pending.request_id, pending.action_ref = request.pk, action_ref
        self.model.pending[request.pk] = pending

    def assert_booking_row(self, code: str) -> None:
        """The database's row of ``code`` is the model's."""
        row = Booking.objects.select_related("room").get(code=code)
        want = self.model.bookings[code]
        got = (
            row.room.code,
            row.start_at,
            row.end_at,
            row.requester_id,
            row.status == "confirmed",
            row.checked_in_at is not None,
        )
        assert got == (
            want.room,
            want.span.start,
            want.span.end,
            self.users[want.owner].pk,
            want.confirmed,
            want.checked_in,
        ), (code, got, want)

    # --- reservations ---------------------------------------------------------------------

    @initialize(first=st.lists(st.tuples(people, windows, room_codes, head_counts), max_size=3))
    def start_with(self, first: list[tuple]) -> None:
        """A few reservations to begin with (rules that act on bookings need some)."""
        for person, window, room, attendees in first:
            version = Room.objects.get(code=room).schedule_version
            self.reserve_with(
                person, Observation(room, self.span(window), version, self.model.tick), attendees
            )

    @rule(person=people, window=windows, attendees=head_counts)
    @counted
    def look(self, person: str, window: tuple, attendees: int) -> None:
        """A search: each room it lists is an observation a later reservation may use (fresh,
        or stale by then)."""
        span = self.span(window)
        for room, version in self.search(person, span, attendees).items():
            if room not in RACE_ROOMS:
                self.model.seen.append(Observation(room, span, version, self.model.tick))

    @rule(
        person=people,
        window=windows,
        room=room_codes,
        attendees=head_counts,
        seen_first=st.booleans(),
    )
    @counted
    def reserve(
        self, person: str, window: tuple, room: str, attendees: int, seen_first: bool
    ) -> None:
        """Reserve right after a search: with the version the search listed, else (a room it
        did not list) the room's version as the day view shows it."""
        span = self.span(window)
        listed = self.search(person, span, attendees) if seen_first else {}
        version = listed.get(room)
        if version is None:
            version = Room.objects.get(code=room).schedule_version
        self.reserve_with(person, Observation(room, span, version, self.model.tick), attendees)

    @precondition(lambda self: self.model.seen)
    @rule(data=st.data(), person=people, attendees=head_counts)
    @counted
    def reserve_seen(self, data: st.DataObject, person: str, attendees: int) -> None:
        """Reserve with what an earlier search said, however long ago."""
        observation = data.draw(st.sampled_from(self.model.seen), label="seen")
        self.reserve_with(person, observation, attendees)

    def reserve_with(self, person: str, observation: Observation, attendees: int) -> None:
        room, span = observation.room, observation.span
        before = Booking.objects.count()
        envelope = self.call(
            person,
            "reserve_room",
            {
                "room_id": room,
                "start_at": span.start.isoformat(),
                "end_at": span.end.isoformat(),
                "attendees": attendees,
                "expected_version": observation.version,
            },
        )
        busy = self.model.busy(room, span)
        fits = attendees <= ROOMS[room].capacity
        untouched = self.model.untouched(room, [span], since=observation.tick)
        if envelope.get("code") == PENDING:
            assert ROOMS[room].premium, envelope
            assert Booking.objects.count() == before
            self.remember(envelope)
            self.pending_opened(
                person,
                envelope,
                Pending(
                    kind="reserve",
                    owner=person,
                    room=room,
                    spans=[span],
                    tick=observation.tick,
                    attendees=attendees,
                ),
            )
            return
        if not envelope["ok"]:
            assert Booking.objects.count() == before, envelope
            if not fits:
                assert envelope["code"] == "over_capacity", envelope
            elif busy:
                assert envelope["reason"] == "conflict", envelope
            else:
                # Free now: refused only as out of date, and only when the window was written
                # after the search read it.
                assert not untouched, ("a free, untouched window was refused", envelope)
                assert envelope["code"] == "stale_version", envelope
            return
        assert fits and not busy, ("booked a window the model holds taken", envelope)
        assert not ROOMS[room].premium, ("a premium room booked without approval", envelope)
        data = envelope["data"]
        assert not data["replayed"]
        assert (data["room_id"], _when(data["start_at"]), _when(data["end_at"])) == (
            room,
            span.start,
            span.end,
        )
        self.model.add(data["booking_id"], person, room, span, attendees)
        self.wrote(person, room, span)
        self.assert_booking_row(data["booking_id"])
        self.remember(envelope)

    # --- cancel and change ----------------------------------------------------------------

    @precondition(lambda self: self.model.bookings)
    @rule(data=st.data(), own=st.sampled_from([True, True, True, False]))
    @counted
    def cancel(self, data: st.DataObject, own: bool) -> None:
        code = data.draw(st.sampled_from(list(self.model.bookings)), label="booking")
        booking = self.model.bookings[code]
        person = booking.owner if own else data.draw(people, label="person")
        envelope = self.call(person, "cancel_booking", {"booking_id": code})
        if person != booking.owner:
            assert (envelope["ok"], envelope.get("code")) == (False, "booking_not_found"), envelope
            return
        assert envelope["ok"], envelope
        assert envelope["data"]["status"] == "cancelled"
        self.remember(envelope)
        if booking.confirmed:
            self.model.cancel(code)
            self.wrote(person, booking.room, booking.span)
        self.assert_booking_row(code)

    @precondition(lambda self: self.model.bookings)
    @rule(
        data=st.data(),
        room=room_codes,
        window=windows,
        attendees=head_counts,
        same=st.sampled_from(["room", "time", "neither", "people"]),
    )
    @counted
    def change(
        self, data: st.DataObject, room: str, window: tuple, attendees: int, same: str
    ) -> None:
        """Move a booking (across rooms, to another time, or both) or change its head count,
        with the target room's version as the change screen reads it."""
        code = data.draw(st.sampled_from(list(self.model.bookings)), label="booking")
        booking = self.model.bookings[code]
        person = booking.owner
        span = self.span(window)
        if same in ("room", "people"):
            room = booking.room
        if same in ("time", "people"):
            span = booking.span
        if same != "people":
            attendees = booking.attendees
        version = Room.objects.get(code=room).schedule_version
        tick = self.model.tick
        envelope = self.call(
            person,
            "change_booking",
            {
                "booking_id": code,
                "room_id": room,
                "start_at": span.start.isoformat(),
                "end_at": span.end.isoformat(),
                "attendees": attendees,
                "expected_version": version,
            },
        )
        moved = (room, span) != (booking.room, booking.span)
        busy = self.model.busy(room, span, besides=code)
        fits = attendees <= ROOMS[room].capacity
        if envelope.get("code") == PENDING:
            assert moved and ROOMS[room].premium, envelope
            # What the write would refuse anyway is refused before an approver is asked.
            assert booking.confirmed, f"a move of cancelled {code} went to an approver"
            self.remember(envelope)
            self.pending_opened(
                person,
                envelope,
                Pending(
                    kind="change",
                    owner=person,
                    room=room,
                    spans=[span],
                    tick=tick,
                    booking=code,
                    booking_was=(booking.room, booking.span, booking.confirmed),
                    attendees=attendees,
                ),
            )
            self.assert_booking_row(code)
            return
        if not envelope["ok"]:
            self.assert_booking_row(code)
            if not booking.confirmed:
                assert envelope["code"] == "booking_not_confirmed", envelope
            elif not moved and attendees == booking.attendees:
                assert envelope["code"] == "nothing_to_change", envelope
            elif not fits:
                assert envelope["code"] == "over_capacity", envelope
            elif busy:
                assert envelope["reason"] == "conflict", envelope
            elif booking.checked_in and moved:
                pass  # refusing to move a meeting already checked in is one honest answer
            else:
                raise AssertionError(("a valid change was refused", envelope))
            return
        assert booking.confirmed and fits and not busy, ("an invalid change was made", envelope)
        assert not (moved and ROOMS[room].premium), f"{code} moved into {room} unapproved"
        out = envelope["data"]
        assert (out["room_id"], _when(out["start_at"]), _when(out["end_at"])) == (
            room,
            span.start,
            span.end,
        )
        self.remember(envelope)
        old_room, old_span = booking.room, booking.span
        self.model.change(code, room, span, attendees)
        if moved:
            self.wrote(person, old_room, old_span)
            self.wrote(person, room, span)
            self.settle_checkin_after_move(code)
        self.assert_booking_row(code)

    def settle_checkin_after_move(self, code: str) -> None:
        """A check-in belongs to the room and time it was made for: a moved booking is no
        longer checked in (else checking in, then moving, dodges the no-show release)."""
        booking = self.model.bookings[code]
        if booking.checked_in:
            row = Booking.objects.get(code=code)
            assert row.checked_in_at is None, (
                f"{code} was checked in, then moved to {booking.room} "
                f"{spans_text([booking.span])}: it is still checked in there"
            )
            booking.checked_in = False

    # --- series ---------------------------------------------------------------------------

    @rule(
        person=people,
        room=room_codes,
        window=windows,
        count=st.sampled_from([2, 2, 3, 12]),
        attendees=head_counts,
        mode=st.sampled_from(["all", "free_only"]),
    )
    @counted
    def reserve_series(
        self, person: str, room: str, window: tuple, count: int, attendees: int, mode: str
    ) -> None:
        first = self.span(window)
        spans = [self.span(window, day_shift=i) for i in range(count)]
        before = Booking.objects.count()
        tick = self.model.tick
        envelope = self.call(
            person,
            "reserve_series",
            {
                "room_id": room,
                "start_at": first.start.isoformat(),
                "end_at": first.end.isoformat(),
                "rrule": f"FREQ=DAILY;COUNT={count}",
                "attendees": attendees,
                "mode": mode,
            },
        )
        free = [not self.model.busy(room, s) for s in spans]
        fits = attendees <= ROOMS[room].capacity
        if envelope.get("code") == PENDING:
            assert ROOMS[room].premium, envelope
            self.remember(envelope)
            self.pending_opened(
                person,
                envelope,
                Pending(
                    kind="series",
                    owner=person,
                    room=room,
                    spans=spans,
                    tick=tick,
                    mode=mode,
                    attendees=attendees,
                ),
            )
            return
        if not envelope["ok"]:
            assert Booking.objects.count() == before, envelope
            if not fits:
                assert envelope["code"] == "over_capacity", envelope
            else:
                assert (mode == "all" and not all(free)) or not any(free), envelope
                assert envelope["code"] == "series_taken", envelope
            return
        assert not ROOMS[room].premium and fits, envelope
        self.remember(envelope)
        self.series_booked(person, room, spans, free, mode, attendees, envelope["data"])

    def series_booked(
        self,
        person: str,
        room: str,
        spans: list[Span],
        free: list[bool],
        mode: str,
        attendees: int,
        out: dict,
    ) -> None:
        assert mode == "free_only" or all(free), ("a taken series was booked", out)
        wanted = [s for s, f in zip(spans, free, strict=True) if f]
        booked = [(_when(b["start_at"]), _when(b["end_at"])) for b in out["booked"]]
        assert booked == [(s.start, s.end) for s in wanted], out
        skipped = [(_when(b["start_at"]), _when(b["end_at"])) for b in out["skipped"]]
        assert skipped == [(s.start, s.end) for s, f in zip(spans, free, strict=True) if not f]
        codes = []
        for item, span in zip(out["booked"], wanted, strict=True):
            self.model.add(
                item["booking_id"], person, room, span, attendees, series=out["series_id"]
            )
            self.wrote(person, room, span)
            codes.append(item["booking_id"])
            self.assert_booking_row(item["booking_id"])
        self.model.add_series(out["series_id"], person, room, codes)

    @precondition(lambda self: self.model.series)
    @rule(data=st.data(), own=st.sampled_from([True, True, True, False]), whole=st.booleans())
    @counted
    def cancel_series(self, data: st.DataObject, own: bool, whole: bool) -> None:
        """Cancel all of a series, or "this and the following" from one of its meetings."""
        series_id = data.draw(st.sampled_from(list(self.model.series)), label="series")
        series = self.model.series[series_id]
        person = series.owner if own else data.draw(people, label="person")
        arguments: dict[str, Any] = {"series_id": series_id}
        anchor = None
        if not whole:
            anchor = data.draw(st.sampled_from(series.codes), label="from")
            arguments["from_booking_id"] = anchor
        envelope = self.call(person, "cancel_series", arguments)
        if person != series.owner:
            assert (envelope["ok"], envelope.get("code")) == (False, "series_not_found"), envelope
            return
        assert envelope["ok"], envelope
        self.remember(envelope)
        expected = self.model.series_targets(series_id, anchor)
        assert sorted(envelope["data"]["cancelled"]) == sorted(expected), (envelope, expected)
        for code in expected:
            booking = self.model.bookings[code]
            self.model.cancel(code)
            self.wrote(person, booking.room, booking.span)
            self.assert_booking_row(code)

    # --- approvals ------------------------------------------------------------------------

    @precondition(lambda self: self.model.pending)
    @rule(data=st.data())
    @counted
    def approve(self, data: st.DataObject) -> None:
        """Every approval of a window still free and untouched since the request executes;
        one that cannot is refused or answered "did not run", and then nothing was written."""
        request_id = data.draw(st.sampled_from(list(self.model.pending)), label="request")
        pending = self.model.pending[request_id]
        before = Booking.objects.count()
        # The inbox's card re-checks the request against the present: it never says "can still
        # be done" of a write that cannot be, and finds nothing against one that must run.
        card = approval_card(request=ApprovalRequest.objects.get(pk=request_id))
        if not self.model.could_execute(pending):
            assert card.problems, (
                f"the inbox shows the {pending.kind} of {pending.room} "
                f"{spans_text(pending.spans)} as still possible; it cannot be"
            )
        elif self.model.must_execute(pending):
            assert not card.problems, card.problems
        result = approval_decide(
            request_id=request_id, approver=self.approver, approve=True, reason="fine"
        )
        action = Action.objects.get(pk=pending.action_ref)
        must = self.model.must_execute(pending)
        if must:
            why = result.message if not result.ok else (action.result or {}).get("message")
            assert result.ok and action.status == "succeeded", (
                f"approved {pending.kind} of {pending.room} {spans_text(pending.spans)}, its "
                f"window untouched since the request, did not run: {why}"
            )
        request = ApprovalRequest.objects.get(pk=request_id)
        self.tally[f"approve:{'refused' if not result.ok else action.status}"] += 1
        if not result.ok:
            assert request.status == "pending", (result, request.status)
            assert result.code == "cannot_succeed", result
            assert Booking.objects.count() == before
            return
        del self.model.pending[request_id]
        # What both sides read afterwards: "done" exactly when it was done.
        outcome = request_outcomes([request])[pending.action_ref]
        assert (outcome["state"] == "done") == (action.status == "succeeded"), outcome
        if action.status != "succeeded":
            # Approved, but it did not run: the answer says so and nothing was written.
            assert action.status in ("rejected", "failed"), action.status
            assert Booking.objects.count() == before
            self.assert_all_rows()
            return
        assert self.model.could_execute(pending), ("executed what cannot be", action.result)
        out = action.result["data"]
        for call in self.model.calls:
            if call.action_ref == pending.action_ref:
                call.made = out[IDENTITY[call.tool]]
        if pending.kind == "reserve":
            span = pending.spans[0]
            assert (out["room_id"], _when(out["start_at"])) == (pending.room, span.start)
            self.model.add(out["booking_id"], pending.owner, pending.room, span, pending.attendees)
            self.wrote(pending.owner, pending.room, span)
            self.assert_booking_row(out["booking_id"])
        elif pending.kind == "series":
            free = [not self.model.busy(pending.room, s) for s in pending.spans]
            self.series_booked(
                pending.owner,
                pending.room,
                pending.spans,
                free,
                pending.mode,
                pending.attendees,
                out,
            )
        else:
            code = pending.booking
            booking = self.model.bookings[code]
            old_room, old_span = booking.room, booking.span
            self.model.change(code, pending.room, pending.spans[0], pending.attendees)
            self.wrote(pending.owner, old_room, old_span)
            self.wrote(pending.owner, pending.room, pending.spans[0])
            self.settle_checkin_after_move(code)
            self.assert_booking_row(code)

    @precondition(lambda self: self.model.pending)
    @rule(data=st.data(), reason=st.sampled_from(["Not now.", "Too expensive."]))
    @counted
    def reject(self, data: st.DataObject, reason: str) -> None:
        request_id = data.draw(st.sampled_from(list(self.model.pending)), label="request")
        pending = self.model.pending.pop(request_id)
        before = Booking.objects.count()
        result = approval_decide(
            request_id=request_id, approver=self.approver, approve=False, reason=reason
        )
        assert result.ok, result
        assert ApprovalRequest.objects.get(pk=request_id).status == "rejected"
        assert Action.objects.get(pk=pending.action_ref).status == "rejected"
        assert Booking.objects.count() == before

    @precondition(lambda self: self.model.calls)
    @rule(data=st.data(), last=st.booleans())
    @counted
    def retry(self, data: st.DataObject, last: bool) -> None:
        """A write sent again under its key (the last one: a double submit; any: a client's
        retry): it answers what the first did (green while that still holds), the same wait
        while its approval is pending, and what the approved call did once it ran: never a
        second approval, never a second write (the invariants compare every row)."""
        call = (
            self.model.calls[-1]
            if last
            else data.draw(st.sampled_from(self.model.calls), label="call")
        )
        waiting = {p.action_ref for p in self.model.pending.values()}
        if call.action_ref and call.action_ref not in waiting and not call.made:
            return  # its approval was refused or it did not run: a new request, not a retry
        envelope = self.call(call.person, call.tool, call.arguments, key=call.key)
        if call.action_ref in waiting:
            assert envelope.get("code") == PENDING, envelope
            assert envelope["pending"]["action_id"] == call.action_ref, envelope
            return
        assert envelope.get("code") != PENDING, (
            f"{call.tool} sent again under its key after it ran ({call.made}) asks an approver "
            "again"
        )
        if envelope["ok"]:
            assert envelope["data"][IDENTITY[call.tool]] == call.made, (call, envelope)
        else:
            assert envelope["code"] == "receipt_no_longer_holds", envelope

    # --- check-in and the no-show release -------------------------------------------------

    @precondition(lambda self: self.model.bookings)
    @rule(data=st.data(), minutes=st.sampled_from([-10, -5, 0, 10, 20]))
    @counted
    def check_in(self, data: st.DataObject, minutes: int) -> None:
        """Check in at ``minutes`` from the start (the clock never goes back; a cancelled
        booking's time does not move it: a raced one's time is the race's)."""
        code = data.draw(st.sampled_from(list(self.model.bookings)), label="booking")
        booking = self.model.bookings[code]
        now = self.model.clock
        if booking.confirmed:
            now = max(now, booking.span.start + timedelta(minutes=minutes))
        self.model.clock = now
        expected = self.model.checkin_refusal(code, now)
        try:
            booking_check_in(user=self.users[booking.owner], booking_code=code, now=now)
            refused = None
        except BookingError as exc:
            refused = exc.code
        assert refused == expected, (refused, expected)
        if refused is None:
            self.model.check_in(code)
        self.assert_booking_row(code)

    @rule(day=st.integers(0, 3), hour=st.integers(9, 12), quarter=st.integers(0, 3))
    @counted
    def release(self, day: int, hour: int, quarter: int) -> None:
        """The beat's no-show sweep at a moment of the model's clock (never earlier than it)."""
        moment = self.base + timedelta(days=day, hours=hour, minutes=15 * quarter)
        now = max(self.model.clock, moment)
        self.model.clock = now
        expected = self.model.release(now)
        released = bookings_release_no_shows(now=now)
        self.tally["released"] += len(released.codes)
        assert sorted(released.codes) == sorted(c for c, _ in expected), (released, expected)
        for code, span_room in expected:
            self.wrote(self.model.bookings[code].owner, *span_room)
            self.assert_booking_row(code)

    # --- lists ----------------------------------------------------------------------------

    def assert_list_complete(self, person: str, limit: int) -> None:
        """list_my_bookings paged to the end: each booking once, exactly the person's."""
        listed: list[tuple[str, str]] = []
        cursor = None
        for _ in range(200):
            arguments: dict[str, Any] = {"limit": limit}
            if cursor:
                arguments["cursor"] = cursor
            envelope = self.call(person, "list_my_bookings", arguments)
            assert envelope["ok"], envelope
            page = envelope["data"]
            assert len(page["bookings"]) <= limit
            listed += [(b["booking_id"], b["status"]) for b in page["bookings"]]
            assert page["has_more"] == (page["next_cursor"] is not None), page
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert sorted(listed) == self.model.listing(person), (person, limit, listed)

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def database_is_the_model(self) -> None:
        """No overlap among confirmed bookings of a room; every row as the model has it; the
        waiting approvals are the model's."""
        self.tally["checks"] += 1
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT a.code, b.code FROM bookings_booking a JOIN bookings_booking b"
                " ON a.room_id = b.room_id AND a.id < b.id AND a.during && b.during"
                " WHERE a.status = 'confirmed' AND b.status = 'confirmed'"
            )
            assert cursor.fetchall() == []
        self.assert_all_rows()
        waiting = set(ApprovalRequest.objects.filter(status="pending").values_list("pk", flat=True))
        assert waiting == set(self.model.pending)

    def assert_all_rows(self) -> None:
        rows = Booking.objects.select_related("room")
        got = {
            b.code: (
                b.room.code,
                b.start_at,
                b.end_at,
                b.requester_id,
                b.status == "confirmed",
                b.checked_in_at is not None,
                b.series_id,
            )
            for b in rows
        }
        want = {
            code: (
                b.room,
                b.span.start,
                b.span.end,
                self.users[b.owner].pk,
                b.confirmed,
                b.checked_in,
                b.series,
            )
            for code, b in self.model.bookings.items()
        }
        assert got == want
        assert set(BookingSeries.objects.values_list("pk", flat=True)) == set(self.model.series)

    @invariant()
    def a_window_shown_free_can_be_booked(self) -> None:
        """Every window the last step wrote, searched again: each room the search lists as free
        takes a reservation with the version it returned (tried in a savepoint, rolled back)."""
        probes, self.recent = sorted(set(self.recent)), []
        for start, end in sorted({(s, e) for _, s, e in probes}):
            span = Span(start, end)
            found = room_search(start_at=start, end_at=end, attendees=1, user=self.users["p1"])
            assert sorted(a.room.code for a in found) == self.model.free_rooms(span, 1)
            for available in found:
                refused = probe_reserve(
                    self.users["p1"], available.room.code, span, available.version
                )
                assert refused is None, (
                    f"the search showed {available.room.code} free {spans_text([span])} at "
                    f"version {available.version}; reserving it with that version: {refused}"
                )

    @invariant()
    def lists_are_complete(self) -> None:
        """The people whose bookings the last step wrote, paged at the largest page (what the
        assistant asks for) or, now and then, a small one."""
        dirty, self.dirty = sorted(self.dirty), set()
        for person in dirty:
            self.assert_list_complete(person, PAGE_SIZES[self.model.tick % len(PAGE_SIZES)])

    # --- races ----------------------------------------------------------------------------
    #
    # Real threads, so their order is not the test's to choose: each race acts on a booking of
    # its own in the race rooms, which no other rule books, and ends with that booking cancelled.
    # Whatever the order was, what later steps draw from and predict with is the same after a
    # race step (Hypothesis replays a sequence to shrink it, and a step must leave the same
    # state each time), while the invariants still probe every window the race wrote.

    def race_booking(self, window: tuple) -> tuple[str, Span]:
        span = self.span(window)
        version = Room.objects.get(code=RACE_FROM).schedule_version
        self.reserve_with(RACER, Observation(RACE_FROM, span, version, self.model.tick), 1)
        code = next(reversed(self.model.bookings))
        return code, span

    @rule(
        window=windows,
        to=st.lists(st.tuples(st.sampled_from(RACE_ROOMS), windows), min_size=2, max_size=6),
    )
    @counted
    def race_changes(self, window: tuple, to: list[tuple[str, tuple]]) -> None:
        """Several changes of one booking at once: no crash, no open circuit; each answer is a
        change or a clear refusal, and the booking ends where a change that answered green put
        it (the one committed last was verified after every other)."""
        code, start = self.race_booking(window)
        moves = [(room, self.span(w)) for room, w in to]
        versions = dict(Room.objects.values_list("code", "schedule_version"))

        def change(i: int) -> dict:
            room, span = moves[i]
            return self.racer_call(
                "change_booking",
                {
                    "booking_id": code,
                    "room_id": room,
                    "start_at": span.start.isoformat(),
                    "end_at": span.end.isoformat(),
                    "expected_version": versions[room],
                },
            )

        answers = run_together(len(moves), change)
        for answer in answers:
            if not answer["ok"]:
                assert answer["reason"] in ("conflict", "invalid_input"), answer
        row = Booking.objects.select_related("room").get(code=code)
        now_at = (row.room.code, Span(row.start_at, row.end_at))
        won = [moves[i] for i, answer in enumerate(answers) if answer["ok"]]
        assert now_at in won if won else now_at == (RACE_FROM, start), (won, now_at)
        self.race_settled(code)
        envelope = self.call(RACER, "cancel_booking", {"booking_id": code})
        assert envelope["ok"], envelope
        self.model.cancel(code)
        self.wrote(RACER, *self.model.bookings[code].where())
        self.assert_booking_row(code)

    @rule(
        window=windows,
        to=st.tuples(st.sampled_from(RACE_ROOMS), windows),
        delay=st.sampled_from([0, 3, 6, 10, 15]),
    )
    @counted
    def race_change_and_cancel(self, window: tuple, to: tuple, delay: int) -> None:
        """A change and a cancel of one booking at once (the cancel ``delay`` ms later, so that
        it may land anywhere in the change): one order or the other, the booking cancelled
        either way, and no slot left unbookable (the invariants probe both windows)."""
        code, _ = self.race_booking(window)
        room, span = to[0], self.span(to[1])
        version = Room.objects.get(code=room).schedule_version

        def work(i: int) -> dict:
            if i == 0:
                time.sleep(delay / 1000)
                return self.racer_call("cancel_booking", {"booking_id": code})
            return self.racer_call(
                "change_booking",
                {
                    "booking_id": code,
                    "room_id": room,
                    "start_at": span.start.isoformat(),
                    "end_at": span.end.isoformat(),
                    "expected_version": version,
                },
            )

        cancelled, _changed = run_together(2, work)
        assert cancelled["ok"], cancelled
        self.race_settled(code)
        assert not self.model.bookings[code].confirmed, "the cancel answered green"

    def racer_call(self, tool: str, arguments: dict[str, Any]) -> dict:
        envelope = tool_call_governed(
            user=self.users[RACER],
            name=tool,
            arguments=arguments,
            idempotency_key=uuid.uuid4().hex,
            channel="web",
        )
        _envelope_sane(envelope)
        return envelope

    def race_settled(self, code: str) -> None:
        """Take the raced booking's row as the outcome (the answers were checked): the windows
        it left and entered are written."""
        booking = self.model.bookings[code]
        row = Booking.objects.select_related("room").get(code=code)
        moved_to = (row.room.code, Span(row.start_at, row.end_at))
        if moved_to != booking.where():
            self.wrote(RACER, *booking.where())
            self.model.change(code, *moved_to, row.attendees)
            self.wrote(RACER, *moved_to)
        if row.status != "confirmed" and booking.confirmed:
            self.model.cancel(code)
            self.wrote(RACER, *moved_to)
        self.assert_booking_row(code)


def spans_text(spans: list[Span]) -> str:
    """Windows in local time, short: "Mon 12-07 11:00-11:30"."""
    return ", ".join(
        f"{s.start.astimezone(SHANGHAI):%a %m-%d %H:%M}-{s.end.astimezone(SHANGHAI):%H:%M}"
        for s in spans
    )


def probe_reserve(user: Any, room: str, span: Span, version: int) -> str | None:
    """Reserve ``room`` for ``span`` with ``version`` and undo it: the refusal's code, or None
    when it would have been booked."""
    try:
        with transaction.atomic():
            booking_reserve(
                user=user,
                room_code=room,
                start_at=span.start,
                end_at=span.end,
                attendees=1,
                expected_version=version,
                idempotency_key=f"probe-{uuid.uuid4().hex}",
            )
            transaction.set_rollback(True)
    except BookingError as exc:
        return exc.code
    return None


def run_together(count: int, work: Callable[[int], dict]) -> list[dict]:
    """``work(i)`` in ``count`` threads released at once, each on its own connection; their
    answers, or the first exception one of them raised (after all have ended)."""
    barrier = threading.Barrier(count)
    outcomes: list[Any] = [None] * count  # each answer, or what its thread raised

    def runner(i: int) -> None:
        try:
            connection.ensure_connection()
            barrier.wait(timeout=JOIN_TIMEOUT)
            outcomes[i] = work(i)
        except BaseException as exc:  # raised below, once every thread has ended
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a racer is still waiting"
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes


def _forget_runtime_counters() -> None:
    """The runtime's per-tool circuits and per-person rate windows start empty (only those
    keys: the broker's share the Redis database with them)."""
    redis = get_redis()
    for pattern in ("agentops:circuit:*", "agentops:rate:*"):
        for key in redis.scan_iter(match=pattern, count=500):
            redis.delete(key)


def _clear_statement() -> str:
    """What empties every table that is empty now (before the first example): what an example
    writes goes, the people, their groups and what migrations put there stay. Deletes (20 ms),
    not TRUNCATE (200 ms: shrinking replays hundreds of examples), in one transaction: Django's
    foreign keys are checked at commit. The tables' sequences start again,
    so that every example and each replay while shrinking numbers its rows alike (B200, ...)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
        empty = []
        for (name,) in cursor.fetchall():
            cursor.execute(f'SELECT NOT EXISTS (SELECT FROM "{name}")')
            if cursor.fetchone()[0]:
                empty.append(name)
        cursor.execute(
            "SELECT s.relname FROM pg_class s"
            " JOIN pg_depend d ON d.objid = s.oid AND d.deptype IN ('a', 'i')"
            " JOIN pg_class t ON t.oid = d.refobjid"
            " WHERE s.relkind = 'S' AND t.relname = ANY(%s)",
            [empty],
        )
        sequences = [name for (name,) in cursor.fetchall()] + ["bookings_booking_code_seq"]
    return "; ".join(
        [f'DELETE FROM "{name}"' for name in empty]
        + [f'ALTER SEQUENCE "{name}" RESTART' for name in sequences]
    )


@pytest.fixture
def machine(settings, request):
    """The machine's world: three employees and an approver, the per-person limits out of the
    way (three fast callers: the limits are tested on their own), the circuit breaker at its
    production threshold (races must not open it), and the worker's work done inline (Celery
    eager: an approved call runs inside approval_decide's commit)."""
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 100_000
    settings.APPROVAL_PENDING_PER_REQUESTER = 100_000
    settings.APPROVAL_REQUESTS_PER_HOUR = 100_000
    settings.TOOL_CIRCUIT_FAILURES = 5
    BookingMachine.users = {
        p: user_create(p, department="Engineering", roles=[EMPLOYEES]) for p in PEOPLE
    }
    BookingMachine.approver = user_create(
        "a01", department="Engineering", roles=[EMPLOYEES, APPROVERS]
    )
    today = datetime.now(SHANGHAI).date() + timedelta(days=2)
    BookingMachine.base = datetime(today.year, today.month, today.day, tzinfo=SHANGHAI)
    BookingMachine.clear = _clear_statement()
    BookingMachine.tally = Counter()
    was = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield BookingMachine
    finally:
        app.conf.task_always_eager = was
        _forget_runtime_counters()
        _summary(request.config, BookingMachine.tally)


class _Summary:
    """A section at the end of pytest's report: how much the machine ran (pass or fail)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.section("booking state machine")
        for line in self.lines:
            terminalreporter.write_line(line)


def _summary(config: pytest.Config, tally: Counter) -> None:
    tally = tally.copy()
    examples, checks = tally.pop("examples", 0), tally.pop("checks", 0)
    line = f"{examples} sequences, {checks - examples} steps; " + ", ".join(
        f"{name} {count}" for name, count in sorted(tally.items())
    )
    summary = config.pluginmanager.get_plugin("booking-state-machine")
    if summary is None:
        summary = _Summary()
        config.pluginmanager.register(summary, "booking-state-machine")
    summary.lines.append(line)


def test_the_booking_state_machine_keeps_its_invariants(machine):
    # The model's clock assumes the product's check-in settings.
    assert (CHECKIN_OPENS.seconds // 60, CHECKIN_GRACE.seconds // 60, SERIES_MISSED) == (
        django_settings.BOOKING_CHECKIN_OPEN_MINUTES,
        django_settings.BOOKING_CHECKIN_GRACE_MINUTES,
        django_settings.BOOKING_SERIES_MISSED_CHECKINS,
    )
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )
