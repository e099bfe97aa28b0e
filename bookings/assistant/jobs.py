"""The rules planner's jobs besides booking: availability questions (read only), listing one's
bookings (read only), cancelling one's own bookings (several only once the person confirmed
the list), moving (not available yet: said honestly), and the questions a booking request
raises before any write (missing fields, a guess to confirm, a room or word not understood,
someone else named)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from agentops.contract import ModelContext, Observation, Proposal, Step, StepOutcome
from bookings.assistant import replies
from bookings.assistant.parsing.moves import MovePlan, move_ask, resolve_move
from bookings.assistant.parsing.reading import Job, Reading
from bookings.assistant.parsing.rooms import RoomName, close_to_a_name, nearest_names
from bookings.assistant.parsing.words import bends

DAY_HOURS = range(9, 18)  # the hours a day's availability is read in (one search each)
# ... and those of the part of the day the person named ("tomorrow afternoon", "明天上午")
PERIOD_HOURS = {
    "am": range(9, 12),
    "noon": range(11, 14),
    "pm": range(12, 18),
    "evening": range(17, 21),
}
PAGE = 50  # asked per page; a page holds fewer when the tool's size cap needs (has_more then)
# What a run may read for one answer (agentops' default budgets: 12 tool calls, 8 turns): an
# availability answer's searches, and the pages of one's bookings (one a turn, the last turn
# answers). A set larger than that is never answered as if whole: the reply says it read part.
READ_CALLS = 12
LIST_PAGES = 7
# How many free rooms an availability answer lists at most; more: it says more are free.
LISTED_ROOMS = 24
# The part of the day a list of one's bookings is read in ("what do I have tomorrow afternoon"):
# a booking overlapping it is in it. Wider than the hours searched for a free room: a booking
# at 8:00 is in the morning.
PERIOD_MINUTES = {
    "am": (0, 12 * 60),
    "noon": (11 * 60, 14 * 60),
    "pm": (12 * 60, 18 * 60),
    "evening": (17 * 60, 24 * 60),
}


def booking_question(
    reading: Reading, *, rooms: Sequence[RoomName], names: Mapping[str, str], asker: Mapping
) -> Step | None:
    """What to ask before a booking request may write, or None when it may go ahead."""
    frame, language = reading.frame, reading.language
    ask = StepOutcome.ASK_USER
    if frame.for_someone:
        message = replies.for_someone_else(
            language, named=frame.for_someone, asker=asker.get("employee_id", "")
        )
        return Step(message=message, outcome=ask)
    if frame.unknown_rooms:
        name = frame.unknown_rooms[0]
        near = [replies.room_label(r.code, r.name) for r in nearest_names(name, rooms)]
        return Step(message=replies.no_such_room(language, name=name, nearest=near), outcome=ask)
    if frame.unknown_words:
        word = frame.unknown_words[0]
        if bends(word):
            return Step(message=replies.bend_not_understood(language, words=word), outcome=ask)
        close = close_to_a_name(word, rooms)
        label = replies.room_label(close.code, close.name) if close else None
        return Step(
            message=replies.word_not_understood(language, word=word, room=label), outcome=ask
        )
    if frame.unsupported:
        return Step(message=replies.equipment_unknown(language, frame.unsupported), outcome=ask)
    if reading.missing:
        return Step(
            message=replies.missing_question(
                language,
                reading.missing,
                problem=reading.extras.get("problem"),
                vague=frame.vague_attendees,
            ),
            outcome=ask,
        )
    if reading.extras.get("declined"):
        return Step(message=replies.declined(language), outcome=ask)
    if reading.confirm:
        return Step(message=replies.confirm_booking(language, reading, names), outcome=ask)
    return None


def propose(
    ctx: ModelContext,
    reading: Reading,
    *,
    names: Mapping[str, str],
    rooms: Sequence[RoomName],
    now: datetime,
) -> Step:
    language = reading.language
    if reading.job == Job.MOVE:
        return _move(ctx, reading, names, rooms, now)
    if reading.job == Job.UNCLEAR:
        return Step(message=replies.what_can_i_do(language), outcome=StepOutcome.ASK_USER)
    if reading.frame.for_someone and reading.job == Job.CANCEL:
        message = replies.for_someone_else(
            language, named=reading.frame.for_someone, asker=ctx.subject.get("employee_id", "")
        )
        return Step(message=message, outcome=StepOutcome.ASK_USER)
    if reading.frame.unknown_rooms:
        name = reading.frame.unknown_rooms[0]
        near = [replies.room_label(r.code, r.name) for r in nearest_names(name, rooms)]
        return Step(
            message=replies.no_such_room(language, name=name, nearest=near),
            outcome=StepOutcome.ASK_USER,
        )
    if reading.job == Job.AVAILABILITY:
        return _availability(ctx, reading, names, now)
    if reading.job == Job.LIST:
        return _list(ctx, reading, names, now)
    return _cancel(ctx, reading, names, now)


# --- availability -----------------------------------------------------------------------------


def _windows(reading: Reading, now: datetime) -> list[tuple[datetime, datetime]]:
    if reading.start_at is not None and reading.end_at is not None:
        return [(reading.start_at, reading.end_at)]
    assert reading.day_window is not None  # noqa: S101 (a date is required)
    day = reading.day_window[0]
    hours = PERIOD_HOURS.get(reading.frame.period or "", DAY_HOURS)
    slots = [(day.replace(hour=h), day.replace(hour=h) + timedelta(hours=1)) for h in hours]
    return [(s, e) for s, e in slots if s >= now]


def _availability(
    ctx: ModelContext, reading: Reading, names: Mapping[str, str], now: datetime
) -> Step:
    language, frame = reading.language, reading.frame
    if reading.missing:
        return Step(
            message=replies.missing_question(
                language, reading.missing, problem=reading.extras.get("problem")
            ),
            outcome=StepOutcome.ASK_USER,
        )
    windows = _windows(reading, now)
    if not windows:
        return Step(message=replies.day_over(language), outcome=StepOutcome.DONE)
    found = [o for o in ctx.history if o.tool == "find_available_rooms"]
    bad = next((o for o in found if not o.result.get("ok")), None)
    if bad is not None:
        return Step(
            message=replies.search_refused(language, bad.result), outcome=StepOutcome.GAVE_UP
        )
    search = {"attendees": frame.attendees or 1, "equipment": list(frame.equipment)}
    if frame.rooms:
        return _named_availability(ctx, reading, names, windows, search, found)
    return _any_availability(ctx, reading, names, windows, search, found)


def _window_args(window: tuple[datetime, datetime], search: dict[str, Any]) -> dict[str, Any]:
    return {"start_at": window[0].isoformat(), "end_at": window[1].isoformat(), **search}


def _named_availability(
    ctx: ModelContext,
    reading: Reading,
    names: Mapping[str, str],
    windows: list[tuple[datetime, datetime]],
    search: dict[str, Any],
    found: list[Observation],
) -> Step:
    """The rooms the person named, each asked about by name in every window: the search's
    named_room answers for that room wherever it would sort among the free ones. As many rooms
    as the run's reads allow; the others are said to be unchecked."""
    asked = list(reading.frame.rooms)
    checked = asked[: max(1, READ_CALLS // len(windows))]
    if not found:
        return Step(
            [
                Proposal(
                    "find_available_rooms", _window_args(w, search) | {"room_id": code, "limit": 1}
                )
                for code in checked
                for w in windows
            ]
        )
    free: dict[str, list[tuple[datetime, datetime]]] = {}
    for o in found:
        named = o.result.get("data", {}).get("named_room") or {}
        if named.get("available"):
            span = _span_of(o)
            free.setdefault(named["room_id"], []).append(span)
    return _answer(
        reading,
        names,
        windows,
        free={code: free[code] for code in checked if code in free},
        asked_rooms=checked,
        more=False,
        unchecked=asked[len(checked) :],
    )


def _span_of(o: Observation) -> tuple[datetime, datetime]:
    return (
        datetime.fromisoformat(o.arguments["start_at"]),
        datetime.fromisoformat(o.arguments["end_at"]),
    )


def _key(room: Mapping[str, Any]) -> tuple[int, str]:
    """Where a room sorts on the search's pages (and in its cursor): capacity, then code."""
    return int(room["capacity"]), str(room["room_id"])


def _any_availability(
    ctx: ModelContext,
    reading: Reading,
    names: Mapping[str, str],
    windows: list[tuple[datetime, datetime]],
    search: dict[str, Any],
    found: list[Observation],
) -> Step:
    """Every room that fits, in every window, page after page while the run's reads allow.
    Each window's pages list the free rooms in one order (capacity, code); a window whose last
    page says has_more knows nothing of the rooms after that page's last. So the answer names
    only the rooms up to the earliest such stop, each with all its free times, and says when
    more rooms are free: it never reports a room busy (or missing) because its page was not
    read."""
    if not found:
        return Step(
            [
                Proposal("find_available_rooms", _window_args(w, search) | {"limit": PAGE})
                for w in windows
            ]
        )
    pages: dict[tuple[datetime, datetime], list[Observation]] = {}
    for o in found:
        pages.setdefault(_span_of(o), []).append(o)
    rooms: dict[str, dict[str, Any]] = {}
    free: dict[str, list[tuple[datetime, datetime]]] = {}
    # Where each window's read stopped short (its last page said has_more): the last room it
    # listed, and the cursor on (None: no way on).
    stops: dict[tuple[datetime, datetime], tuple[tuple[int, str], str | None]] = {}
    for window, read in pages.items():
        for o in read:
            for room in o.result.get("data", {}).get("rooms", []):
                rooms[room["room_id"]] = room
                free.setdefault(room["room_id"], []).append(window)
        last = read[-1].result.get("data", {})
        listed = last.get("rooms") or []
        if last.get("has_more"):
            stop = _key(listed[-1]) if listed else (-1, "")
            stops[window] = (stop, last.get("next_cursor"))
    horizon = min((key for key, _ in stops.values()), default=None)
    known = [code for code, room in rooms.items() if horizon is None or _key(room) <= horizon]
    # More pages while the reads left can move the horizon: the nearest stops first, and
    # every window stopped at the horizon among them.
    left = READ_CALLS - len(found)
    onward = sorted((key, w, cursor) for w, (key, cursor) in stops.items() if cursor)[:left]
    lowest = {w for w, (key, _) in stops.items() if key == horizon}
    if stops and len(known) < LISTED_ROOMS and lowest <= {w for _, w, _ in onward}:
        return Step(
            [
                Proposal(
                    "find_available_rooms",
                    _window_args(window, search) | {"limit": PAGE, "cursor": cursor},
                )
                for _, window, cursor in onward
            ]
        )
    ranked = [
        code
        for code in _rank(list(rooms.values()), ctx.subject.get("department", ""))
        if code in known
    ]
    return _answer(
        reading,
        names,
        windows,
        free={code: free[code] for code in ranked[:LISTED_ROOMS]},
        asked_rooms=[],
        more=bool(stops) or len(ranked) > LISTED_ROOMS,
    )


def _answer(
    reading: Reading,
    names: Mapping[str, str],
    windows: list[tuple[datetime, datetime]],
    *,
    free: dict[str, list[tuple[datetime, datetime]]],
    asked_rooms: list[str],
    more: bool,
    unchecked: Sequence[str] = (),
) -> Step:
    message = replies.availability(
        reading.language,
        free=free,
        names=names,
        asked_rooms=asked_rooms,
        day=windows[0][0],
        whole_slot=len(windows) == 1 and reading.start_at is not None,
        people=reading.frame.attendees,
        searched=(windows[0][0], windows[-1][1]),
        more=more,
        unchecked=list(unchecked),
    )
    return Step(message=message, outcome=StepOutcome.DONE)


def _rank(rooms: list[dict[str, Any]], department: str) -> list[str]:
    """The rooms found, best first as the booking planner ranks them (own department, no
    approval, smallest): the order the reply lists them in, so "the second one" is the one the
    person saw second."""
    ranked = sorted(
        rooms,
        key=lambda r: (
            r["requires_approval"],
            r["department"] != department,
            r["capacity"],
            int(r["room_id"][1:]),
        ),
    )
    return [r["room_id"] for r in ranked]


# --- my bookings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BookingsRead:
    """The person's bookings as this run's pages of list_my_bookings read them."""

    items: list[dict[str, Any]]
    complete: bool  # the last page said has_more false: the whole (window of the) set was read
    refused: Observation | None  # a page the tool or the gate refused


def _read(ctx: ModelContext) -> BookingsRead:
    pages = [o for o in ctx.history if o.tool == "list_my_bookings"]
    items: list[dict[str, Any]] = []
    for o in pages:
        items.extend(o.result.get("data", {}).get("bookings", []))
    refused = next((o for o in pages if not o.result.get("ok")), None)
    last = pages[-1].result.get("data", {}) if pages else {}
    return BookingsRead(
        items, bool(pages) and refused is None and not last.get("has_more"), refused
    )


def list_window(day: tuple[datetime, datetime] | None, now: datetime) -> dict[str, str]:
    """The window of one's bookings a question is about, as list_my_bookings' from/to: the day
    (or week) it names, else what has not ended yet."""
    if day is not None:
        return {"from": day[0].isoformat(), "to": day[1].isoformat()}
    return {"from": now.isoformat()}


def _list_step(ctx: ModelContext, window: dict[str, str]) -> Step | None:
    """The next page to read, if any: the first; then while the last says has_more, up to
    LIST_PAGES pages (all with the first page's window)."""
    pages = [o for o in ctx.history if o.tool == "list_my_bookings"]
    if not pages:
        return Step([Proposal("list_my_bookings", {"limit": PAGE, **window})])
    last = pages[-1]
    data = last.result.get("data", {})
    first = {k: v for k, v in pages[0].arguments.items() if k != "cursor"}
    more = last.result.get("ok") and data.get("has_more") and data.get("next_cursor")
    if more and len(pages) < LIST_PAGES:
        return Step([Proposal("list_my_bookings", first | {"cursor": data["next_cursor"]})])
    return None


def _matching(items: list[dict[str, Any]], reading: Reading, now: datetime) -> list[dict[str, Any]]:
    """The person's confirmed bookings the reading names: the day or week (in a list, the part
    of the day too), the start time, the room; upcoming ones when no day is named."""
    frame = reading.frame
    chosen = []
    for b in items:
        if b.get("status") != "confirmed":
            continue
        start = datetime.fromisoformat(b["start_at"]).astimezone(now.tzinfo)
        end = datetime.fromisoformat(b["end_at"]).astimezone(now.tzinfo)
        if reading.day_window is not None:
            lo, hi = reading.day_window
            if not (lo <= start < hi):
                continue
        elif end <= now:
            continue
        named_start = frame.start is not None and reading.job == Job.CANCEL
        if named_start and start.hour * 60 + start.minute != frame.start:
            continue
        if frame.rooms and b["room_id"] not in frame.rooms:
            continue
        part = PERIOD_MINUTES.get(frame.period or "") if reading.job == Job.LIST else None
        if part is not None and reading.day_window is not None:  # that part of its own day
            midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
            lo, hi = (midnight + timedelta(minutes=m) for m in part)
            if not (start < hi and end > lo):
                continue
        chosen.append(b)
    return sorted(chosen, key=lambda b: b["start_at"])


def _list(ctx: ModelContext, reading: Reading, names: Mapping[str, str], now: datetime) -> Step:
    step = _list_step(ctx, list_window(reading.day_window, now))
    if step is not None:
        return step
    read = _read(ctx)
    if read.refused is not None:
        return Step(
            message=replies.search_refused(reading.language, read.refused.result),
            outcome=StepOutcome.GAVE_UP,
        )
    chosen = _matching(read.items, reading, now)
    return Step(
        message=replies.my_bookings(
            reading.language,
            chosen,
            names=names,
            when=reading.day_window,
            read=None if read.complete else len(read.items),
        ),
        outcome=StepOutcome.DONE,
    )


# --- cancelling -------------------------------------------------------------------------------


def _cancel(ctx: ModelContext, reading: Reading, names: Mapping[str, str], now: datetime) -> Step:
    language, frame = reading.language, reading.frame
    cancels = [o for o in ctx.history if o.tool == "cancel_booking"]
    if cancels and not cancels[-1].result.get("ok"):
        return Step(
            message=replies.cancel_refused(language, cancels[-1].result),
            outcome=StepOutcome.GAVE_UP,
        )
    done = {o.arguments.get("booking_id") for o in cancels if o.result.get("ok")}
    if frame.bookings:
        if not reading.ready:
            return Step(
                message=replies.confirm_cancel(language, list(frame.bookings), [], names),
                outcome=StepOutcome.ASK_USER,
            )
        remaining = [code for code in frame.bookings if code not in done]
        if not remaining:
            return Step(outcome=StepOutcome.DONE)  # the runtime reports from verified receipts
        return Step([Proposal("cancel_booking", {"booking_id": remaining[0]})])
    if done and not frame.how_many:
        return Step(outcome=StepOutcome.DONE)
    step = _list_step(ctx, list_window(reading.day_window, now))
    if step is not None:
        return step
    read = _read(ctx)
    if read.refused is not None:
        return Step(
            message=replies.search_refused(language, read.refused.result),
            outcome=StepOutcome.GAVE_UP,
        )
    chosen = _matching(read.items, reading, now)
    partial = None if read.complete else len(read.items)
    if not chosen:
        return Step(
            message=replies.nothing_to_cancel(language, when=reading.day_window, read=partial),
            outcome=StepOutcome.ASK_USER,
        )
    counted = frame.how_many is not None and len(chosen) == frame.how_many
    if counted and reading.ready and "which" not in reading.missing and read.complete:
        # "cancel both of my bookings on Friday" and exactly two are there: those two.
        remaining = [b["booking_id"] for b in chosen if b["booking_id"] not in done]
        if not remaining:
            return Step(outcome=StepOutcome.DONE)
        return Step([Proposal("cancel_booking", {"booking_id": remaining[0]})])
    if (
        len(chosen) == 1
        and frame.how_many is None  # "both" and one is there: asked, never the one cancelled
        and reading.ready
        and "which" not in reading.missing
        and read.complete
    ):
        return Step([Proposal("cancel_booking", {"booking_id": chosen[0]["booking_id"]})])
    # Several, none named, or not all read (another may match too): the person confirms the
    # list before anything is cancelled.
    codes = [b["booking_id"] for b in chosen]
    return Step(
        message=replies.confirm_cancel(language, codes, chosen, names, read=partial),
        outcome=StepOutcome.ASK_USER,
    )


# --- moving -----------------------------------------------------------------------------------


def move_bookings(history: Sequence[Observation]) -> list[dict[str, Any]] | None:
    """The person's bookings as read by this run (get_booking or list_my_bookings), or None
    before any read."""
    reads = [o for o in history if o.tool in ("get_booking", "list_my_bookings")]
    if not reads:
        return None
    found: list[dict[str, Any]] = []
    for o in reads:
        data = o.result.get("data") or {}
        if o.result.get("ok"):
            found.extend(data.get("bookings", [data]) if o.tool == "list_my_bookings" else [data])
    return found


def _move(
    ctx: ModelContext,
    reading: Reading,
    names: Mapping[str, str],
    rooms: Sequence[RoomName],
    now: datetime,
) -> Step:
    """Find the booking (by code: get_booking; else the person's list), say what was understood
    and ask when unsure; else search the new slot for the room's version and propose one
    change_booking. The delegation (built by the host the same way) bounds it: one write, the
    new slot, the target room."""
    from bookings.assistant import conversation_dicts

    language = reading.language
    ask = move_ask(
        ctx.goal, today=now.date(), rooms=rooms, conversation=conversation_dicts(ctx.conversation)
    )
    history = ctx.history
    if ask.code and move_bookings(history) is None:
        return Step([Proposal("get_booking", {"booking_id": ask.code})])
    read = None
    if not ask.code:  # the day it names, else what has not ended: every page of it
        step = _list_step(ctx, list_window(_day_of(ask.day, now), now))
        if step is not None:
            return step
        read = _read(ctx)
    bookings = move_bookings(history) or []
    plan = resolve_move(ask, bookings, now)
    delegation = ctx.delegation
    granted = "change_booking" in delegation.tools and delegation.max_writes > 0
    if read is not None and not read.complete and plan.problem not in ("no_change",):
        # Not all read: another booking may match as well (or the only one be unread).
        message = replies.move_question(
            language, "not_named", list(plan.candidates), names, read=len(read.items)
        )
        return Step(message=message, outcome=StepOutcome.ASK_USER)
    if plan.problem is not None or plan.booking is None:
        message = replies.move_question(
            language, plan.problem or "not_named", list(plan.candidates), names
        )
        return Step(message=message, outcome=StepOutcome.ASK_USER)
    if not granted or delegation.window != (plan.start_at, plan.end_at):
        return Step(message=_confirm(language, plan, names), outcome=StepOutcome.ASK_USER)
    changes = [o for o in history if o.tool == "change_booking"]
    if any(o.result.get("ok") for o in changes):
        return Step(outcome=StepOutcome.DONE)  # the runtime reports from the verified receipt
    if changes and changes[-1].result.get("reason") != "conflict":
        return Step(
            message=replies.booking_refused(language, changes[-1].result),
            outcome=StepOutcome.GAVE_UP,
        )
    searches = [o for o in history if o.tool == "find_available_rooms"]
    if changes:  # a conflict: only the searches after it count
        searches = [o for o in searches if o.turn > changes[-1].turn]
    if searches:
        return _change_or_say(plan, searches, language, names)
    if len(changes) >= 3:
        return Step(message=replies.search_unverified(language), outcome=StepOutcome.GAVE_UP)
    assert plan.start_at is not None  # noqa: S101 (resolved: no problem)
    assert plan.end_at is not None  # noqa: S101
    return Step([_search(plan, plan.start_at, plan.end_at)])


def _day_of(day: date | None, now: datetime) -> tuple[datetime, datetime] | None:
    """A date's whole day in the run's time zone."""
    if day is None:
        return None
    start = datetime(day.year, day.month, day.day, tzinfo=now.tzinfo)
    return start, start + timedelta(days=1)


def _confirm(language: str, plan: MovePlan, names: Mapping[str, str]) -> str:
    assert plan.booking is not None  # noqa: S101 (resolved: no problem)
    assert plan.start_at is not None  # noqa: S101
    assert plan.end_at is not None  # noqa: S101
    assert plan.room  # noqa: S101
    return replies.confirm_move(
        language,
        plan.booking,
        room=plan.room,
        start_at=plan.start_at,
        end_at=plan.end_at,
        names=names,
    )


def _outside(plan: MovePlan) -> tuple[datetime, datetime] | None:
    """The part of the new slot outside the booking's own, when it moves within its own room
    and overlaps itself (the search cannot list a room the booking itself holds)."""
    assert plan.booking is not None  # noqa: S101
    assert plan.start_at is not None  # noqa: S101
    assert plan.end_at is not None  # noqa: S101
    if plan.room != plan.booking["room_id"]:
        return None
    old_start = datetime.fromisoformat(str(plan.booking["start_at"]))
    old_end = datetime.fromisoformat(str(plan.booking["end_at"]))
    if plan.end_at <= old_start or plan.start_at >= old_end:
        return None
    if plan.start_at < old_start:
        return plan.start_at, old_start
    if plan.end_at > old_end:
        return old_end, plan.end_at
    return None


def _search(plan: MovePlan, start: datetime, end: datetime) -> Proposal:
    assert plan.booking is not None  # noqa: S101
    return Proposal(
        "find_available_rooms",
        {
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": plan.attendees or int(plan.booking.get("attendees") or 1),
            "room_id": plan.room,
        },
    )


def _in_place(plan: MovePlan) -> bool:
    """Only the head count changes: the booking keeps its room and its time (the search cannot
    list a room the booking itself holds; named_room still gives its version and size)."""
    assert plan.booking is not None  # noqa: S101
    return (
        plan.room == plan.booking["room_id"]
        and plan.start_at == datetime.fromisoformat(str(plan.booking["start_at"]))
        and plan.end_at == datetime.fromisoformat(str(plan.booking["end_at"]))
    )


def _change_or_say(
    plan: MovePlan, searches: list[Observation], language: str, names: Mapping[str, str]
) -> Step:
    """Change with the room's version from a search that lists it free for the new slot (or,
    for a move that overlaps itself, for the part of the new slot outside its own); else say
    the room is not free then."""
    assert plan.booking is not None  # noqa: S101 (resolved: no problem)
    assert plan.start_at is not None  # noqa: S101
    assert plan.end_at is not None  # noqa: S101
    assert plan.room  # noqa: S101
    last = searches[-1]
    if not last.result.get("ok"):
        return Step(
            message=replies.search_refused(language, last.result), outcome=StepOutcome.GAVE_UP
        )
    data = last.result.get("data", {})
    free = {r["room_id"]: r for r in data.get("rooms", [])}
    named = data.get("named_room") or {}
    # The search named the room: named_room answers for it wherever it sorts among the free.
    room = free.get(plan.room) or (
        named if named.get("room_id") == plan.room and named.get("available") else None
    )
    if room is None and _in_place(plan) and named.get("room_id") == plan.room:
        # Its own slot: held by the booking itself. Too small a room is the change's refusal
        # to say (capacity), from the service.
        room = named if named.get("exists") and "version" in named else None
    outside = _outside(plan)
    if room is None and outside is not None and len(searches) == 1:
        return Step([_search(plan, *outside)])
    if room is None:
        return Step(
            message=replies.move_not_free(
                language, room=plan.room, start_at=plan.start_at, end_at=plan.end_at, names=names
            ),
            outcome=StepOutcome.GAVE_UP,
        )
    return Step(
        [
            Proposal(
                "change_booking",
                {
                    "booking_id": plan.booking["booking_id"],
                    "room_id": plan.room,
                    "start_at": plan.start_at.isoformat(),
                    "end_at": plan.end_at.isoformat(),
                    "expected_version": room["version"],
                    **({"attendees": plan.attendees} if plan.attendees else {}),
                },
            )
        ]
    )
