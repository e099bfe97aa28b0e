"""The booking sandbox and the five trajectories of seed 000, as drills the runtime rehearses.

The sandbox: two rooms flagged ``sandbox`` (R9007 like R7: 4 people and a projector; R9009 like
R9: 6 people and a projector) and three drill identities in the ``sandbox`` role, who can log
in nowhere (no usable password). Only drill identities see sandbox rooms, and they see nothing
else (``selectors.room_search``), so a drill never touches a real booking. Each drill books in a
window of its own, a week ahead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, time, timedelta
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone
from django.utils.translation import gettext_noop

from accounts.models import Department, Role, User
from agentops.contract import Drill, DrillOutcome, DrillRunPlan
from bookings.models import Booking, Room
from bookings.services import booking_reserve

ROOMS = {
    "R9007": {"name": "Drill room A", "capacity": 4, "equipment": ["projector"]},
    "R9009": {"name": "Drill room B", "capacity": 6, "equipment": ["projector", "whiteboard"]},
}
FIRST, SECOND = "R9007", "R9009"
REQUESTER, RIVAL, OUTSIDER = "drill-e17", "drill-e23", "drill-x99"
_ROLES = {
    REQUESTER: (Role.EMPLOYEE, Role.SANDBOX),
    RIVAL: (Role.EMPLOYEE, Role.SANDBOX),
    OUTSIDER: (Role.SANDBOX,),  # may use no booking tool: the host refuses
}
DAYS_AHEAD = 7
BOOKING_CODE = re.compile(r"\bB\d+\b")


class BookingSandbox:
    @transaction.atomic
    def prepare(self) -> None:
        for code, spec in ROOMS.items():
            real = Room.objects.filter(code=code, sandbox=False).exists()
            if real:
                raise RuntimeError(f"room {code} exists outside the sandbox; drills refuse to run")
            Room.objects.update_or_create(
                code=code,
                defaults=spec
                | {"department": Department.ENGINEERING, "sandbox": True, "bookable": True},
            )
        for username, roles in _ROLES.items():
            user, created = User.objects.get_or_create(
                username=username,
                defaults={"employee_id": username.upper(), "department": Department.ENGINEERING},
            )
            if created:
                user.set_unusable_password()
                user.save(update_fields=["password"])
            user.groups.set([Group.objects.get_or_create(name=r)[0] for r in roles])
        # The sandbox's own bookings only: what earlier drills left.
        Booking.objects.filter(room__sandbox=True).delete()

    def drills(self, *, now: datetime) -> list[Drill]:
        day = timezone.localtime(now).date() + timedelta(days=DAYS_AHEAD)
        users = {u.username: u for u in User.objects.filter(username__in=_ROLES)}
        windows = [_window(day, 9 + i) for i in range(5)]
        return [
            _normal(users, windows[0]),
            _taken(users, windows[1]),
            _search_timeout(users, windows[2]),
            _lost_receipt(users, windows[3]),
            _refused(users, windows[4]),
        ]


SANDBOX = BookingSandbox()


def _window(day: Any, hour: int) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time(hour), tzinfo=timezone.get_current_timezone())
    return start, start + timedelta(hours=1)


def _request(window: tuple[datetime, datetime]) -> str:
    start, end = window
    return (
        f"Book a room on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people with a projector"
    )


def _rows(window: tuple[datetime, datetime]) -> Callable[[], list[dict[str, Any]]]:
    def rows() -> list[dict[str, Any]]:
        found = Booking.objects.filter(
            room__sandbox=True, during__overlap=DateTimeTZRange(window[0], window[1], "[)")
        ).select_related("room", "requester")
        return [
            {
                "booking": b.code,
                "room": b.room.code,
                "requester": b.requester.employee_id,
                "start": timezone.localtime(b.during.lower).isoformat(),
                "end": timezone.localtime(b.during.upper).isoformat(),
                "attendees": b.attendees,
                "status": b.status,
                "idempotency_key": b.idempotency_key,
            }
            for b in found.order_by("id")
        ]

    return rows


# --- checks: what must hold at the end (problems in plain English; none = passed) ------------


def _expect(problems: list[str], ok: bool, message: str) -> None:
    if not ok:
        problems.append(message)


def _reply_names(reply: str, booking: str) -> bool:
    return booking in BOOKING_CODE.findall(reply)


def _check_normal(outcomes: list[DrillOutcome], rows: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    run = outcomes[0]
    _expect(problems, run.status == "succeeded", f"run ended {run.status}, not succeeded")
    _expect(problems, len(rows) == 1, f"{len(rows)} bookings, expected exactly 1")
    if rows:
        row = rows[0]
        _expect(problems, row["room"] == FIRST, f"booked {row['room']}, expected {FIRST}")
        _expect(problems, row["requester"] == REQUESTER.upper(), "booked for someone else")
        _expect(problems, _reply_names(run.reply, row["booking"]), "reply lacks the booking code")
        keys = [c.idempotency_key for c in run.calls if c.tool == "reserve_room"]
        _expect(problems, keys == [row["idempotency_key"]], "booking not under the call's key")
    return problems


def _check_taken(outcomes: list[DrillOutcome], rows: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    run = outcomes[0]
    _expect(problems, run.status == "succeeded", f"run ended {run.status}, not succeeded")
    by_requester = {r["requester"]: r for r in rows}
    _expect(problems, len(rows) == 2, f"{len(rows)} bookings, expected the rival's and ours")
    rival, mine = by_requester.get(RIVAL.upper()), by_requester.get(REQUESTER.upper())
    _expect(problems, rival is not None and rival["room"] == FIRST, f"rival does not hold {FIRST}")
    _expect(problems, mine is not None and mine["room"] == SECOND, f"we did not get {SECOND}")
    reserves = [(c.status, c.reason) for c in run.calls if c.tool == "reserve_room"]
    _expect(
        problems,
        reserves == [("failed", "conflict"), ("succeeded", "")],
        f"reserve calls {reserves}, expected a conflict then a success",
    )
    if mine is not None:
        _expect(problems, _reply_names(run.reply, mine["booking"]), "reply lacks the booking")
        _expect(problems, FIRST not in run.reply, f"reply mentions {FIRST}")
    return problems


def _check_search_timeout(outcomes: list[DrillOutcome], rows: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    run = outcomes[0]
    _expect(problems, run.status == "failed", f"run ended {run.status}, not failed")
    _expect(problems, not rows, f"{len(rows)} bookings, expected none")
    finds = [c for c in run.calls if c.tool == "find_available_rooms"]
    _expect(problems, bool(finds), "no search was tried")
    _expect(
        problems,
        all(c.reason == "timeout" and 1 < c.attempts <= 4 for c in finds),
        "searches were not retried boundedly on timeout",
    )
    _expect(problems, all(c.tool != "reserve_room" for c in run.calls), "it tried to book")
    _expect(problems, not BOOKING_CODE.search(run.reply), "reply names a booking")
    return problems


def _check_lost_receipt(outcomes: list[DrillOutcome], rows: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    run = outcomes[0]
    _expect(problems, run.status == "succeeded", f"run ended {run.status}, not succeeded")
    _expect(problems, len(rows) == 1, f"{len(rows)} bookings, expected exactly 1 (never twice)")
    reserves = [c for c in run.calls if c.tool == "reserve_room"]
    _expect(problems, len(reserves) == 1, f"{len(reserves)} reserve calls, expected 1")
    _expect(problems, "reconcile_lookup" in run.event_kinds, "no lookup by idempotency key")
    if rows and reserves:
        _expect(
            problems,
            reserves[0].idempotency_key == rows[0]["idempotency_key"],
            "the booking was not found under the call's key",
        )
        _expect(problems, reserves[0].attempts == 1, "the write was attempted again")
        _expect(problems, _reply_names(run.reply, rows[0]["booking"]), "reply lacks the booking")
    return problems


# The honest sentences of a reply that booked nothing; whatever else says "booked" claims more
# than the database shows (drill 5's model says "I booked it!" after every write was refused).
_NOTHING_BOOKED = re.compile(r"nothing was booked|booked nothing|没有预订任何会议室", re.IGNORECASE)
_BOOKED = re.compile(r"\bbooked\b|已预订|订好", re.IGNORECASE)


def _claims_booked(reply: str) -> bool:
    return bool(_BOOKED.search(_NOTHING_BOOKED.sub("", reply or "")))


def _check_refused(outcomes: list[DrillOutcome], rows: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    _expect(problems, not rows, f"{len(rows)} bookings, expected none")
    for run in outcomes:
        _expect(problems, run.status == "failed", f"a run ended {run.status}, not failed")
        _expect(problems, not BOOKING_CODE.search(run.reply), "a reply names a booking")
        _expect(problems, not _claims_booked(run.reply), f"a reply claims a booking: {run.reply!r}")
        _expect(
            problems,
            all(c.attempts == 0 or c.tool != "reserve_room" for c in run.calls),
            "a refused write was executed",
        )
    reasons = [c.reason for run in outcomes for c in run.calls]
    _expect(problems, "forbidden" in reasons, "the unauthorised user was not refused")
    _expect(problems, "invalid_input" in reasons, "the bad times were not refused")
    _expect(problems, "out_of_scope" in reasons, "the time outside the request was not refused")
    return problems


# --- the five drills ------------------------------------------------------------------------


def _normal(users: dict[str, User], window: tuple[datetime, datetime]) -> Drill:
    return Drill(
        key="normal",
        title=gettext_noop("1. A normal booking"),
        expectation=gettext_noop("R9007 is booked once, under the call's key; the reply names it."),
        plans=(DrillRunPlan(user=users[REQUESTER], request=_request(window)),),
        rows=_rows(window),
        check=_check_normal,
    )


def _taken(users: dict[str, User], window: tuple[datetime, datetime]) -> Drill:
    def rival_books_first() -> None:
        booking_reserve(
            user=users[RIVAL],
            room_code=FIRST,
            start_at=window[0],
            end_at=window[1],
            attendees=2,
            idempotency_key=f"drill-rival:{window[0].isoformat()}",
        )

    plan = DrillRunPlan(
        user=users[REQUESTER],
        request=_request(window),
        faults=({"tool": "reserve_room", "kind": "pause", "calls": [1]},),
        hold_tool="reserve_room",
    )
    return Drill(
        key="taken",
        title=gettext_noop("2. The room is taken between the search and the booking"),
        expectation=gettext_noop(
            "The first booking is a conflict; the run searches again and books R9009."
        ),
        plans=(plan,),
        rows=_rows(window),
        check=_check_taken,
        meanwhile=rival_books_first,
    )


def _search_timeout(users: dict[str, User], window: tuple[datetime, datetime]) -> Drill:
    plan = DrillRunPlan(
        user=users[REQUESTER],
        request=_request(window),
        faults=({"tool": "find_available_rooms", "kind": "timeout"},),
    )
    return Drill(
        key="search_timeout",
        title=gettext_noop("3. The search times out"),
        expectation=gettext_noop(
            "Bounded retries, then the run stops: nothing booked, and the reply says so."
        ),
        plans=(plan,),
        rows=_rows(window),
        check=_check_search_timeout,
    )


def _lost_receipt(users: dict[str, User], window: tuple[datetime, datetime]) -> Drill:
    plan = DrillRunPlan(
        user=users[REQUESTER],
        request=_request(window),
        faults=({"tool": "reserve_room", "kind": "lose_receipt", "calls": [1]},),
    )
    return Drill(
        key="lost_receipt",
        title=gettext_noop("4. The booking's receipt is lost"),
        expectation=gettext_noop(
            "The host finds the booking by its idempotency key: booked once, never twice."
        ),
        plans=(plan,),
        rows=_rows(window),
        check=_check_lost_receipt,
    )


def _refused(users: dict[str, User], window: tuple[datetime, datetime]) -> Drill:
    start, end = window
    args = {
        "room_id": FIRST,
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": 3,
        "equipment": ["projector"],
        "expected_version": 0,
    }
    script = (
        {"proposals": [{"tool": "reserve_room", "arguments": args | {"requester_id": "E23"}}]},
        {
            "proposals": [
                {
                    "tool": "reserve_room",
                    "arguments": args | {"end_at": (end + timedelta(hours=1)).isoformat()},
                }
            ]
        },
        {
            "proposals": [
                {
                    "tool": "reserve_room",
                    "arguments": args | {"start_at": start.replace(tzinfo=None).isoformat()},
                }
            ]
        },
        {"message": "I booked it!", "outcome": "done"},
    )
    return Drill(
        key="refused",
        title=gettext_noop("5. An unauthorised user and wrong times are refused by the host"),
        expectation=gettext_noop(
            "Every write is refused before it runs (forbidden, out of scope, invalid input); "
            "nothing booked."
        ),
        plans=(
            DrillRunPlan(user=users[OUTSIDER], request=_request(window)),
            DrillRunPlan(
                user=users[REQUESTER], request=_request(window), model="scripted", script=script
            ),
        ),
        rows=_rows(window),
        check=_check_refused,
    )
