"""The rules planner's jobs besides booking: availability questions (read only), listing one's
bookings (read only), cancelling one's own bookings (several only once the person confirmed
the list), moving (not available yet: said honestly), and the questions a booking request
raises before any write (missing fields, a guess to confirm, a room or word not understood,
someone else named)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from agentops.contract import ModelContext, Observation, Proposal, Step, StepOutcome
from bookings.assistant import replies
from bookings.assistant.parsing.moves import MovePlan, move_ask, resolve_move
from bookings.assistant.parsing.reading import Job, Reading
from bookings.assistant.parsing.rooms import RoomName, close_to_a_name, nearest_names

DAY_HOURS = range(9, 18)  # the hours a day's availability is read in (one search each)
# ... and those of the part of the day the person named ("tomorrow afternoon", "明天上午")
PERIOD_HOURS = {
    "am": range(9, 12),
    "noon": range(11, 14),
    "pm": range(12, 18),
    "evening": range(17, 21),
}
PAGE = 50
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
    searches = [
        {
            "start_at": s.isoformat(),
            "end_at": e.isoformat(),
            "attendees": frame.attendees or 1,
            "equipment": list(frame.equipment),
            **({"room_id": frame.rooms[0]} if len(frame.rooms) == 1 else {}),
        }
        for s, e in windows
    ]
    found = [o for o in ctx.history if o.tool == "find_available_rooms"]
    if not found:
        return Step([Proposal("find_available_rooms", args) for args in searches])
    if any(not o.result.get("ok") for o in found):
        bad = next(o for o in found if not o.result.get("ok"))
        return Step(
            message=replies.search_refused(language, bad.result), outcome=StepOutcome.GAVE_UP
        )
    free: dict[str, list[tuple[datetime, datetime]]] = {}
    for o in found:
        start = datetime.fromisoformat(o.arguments["start_at"])
        end = datetime.fromisoformat(o.arguments["end_at"])
        for room in o.result.get("data", {}).get("rooms", []):
            free.setdefault(room["room_id"], []).append((start, end))
    if frame.rooms:
        free = {code: spans for code, spans in free.items() if code in frame.rooms}
    order = _rank(found, ctx.subject.get("department", ""))
    free = {code: free[code] for code in order if code in free}
    message = replies.availability(
        language,
        free=free,
        names=names,
        asked_rooms=list(frame.rooms),
        day=windows[0][0],
        whole_slot=len(windows) == 1 and reading.start_at is not None,
        people=frame.attendees,
        searched=(windows[0][0], windows[-1][1]),
    )
    return Step(message=message, outcome=StepOutcome.DONE)


def _rank(found: list[Observation], department: str) -> list[str]:
    """The rooms found, best first as the booking planner ranks them (own department, no
    approval, smallest): the order the reply lists them in, so "the second one" is the one the
    person saw second."""
    rooms = {}
    for o in found:
        for room in o.result.get("data", {}).get("rooms", []):
            rooms[room["room_id"]] = room
    ranked = sorted(
        rooms.values(),
        key=lambda r: (
            r["requires_approval"],
            r["department"] != department,
            r["capacity"],
            int(r["room_id"][1:]),
        ),
    )
    return [r["room_id"] for r in ranked]


# --- my bookings ------------------------------------------------------------------------------


def _pages(ctx: ModelContext) -> tuple[list[dict[str, Any]], Observation | None]:
    pages = [o for o in ctx.history if o.tool == "list_my_bookings"]
    items: list[dict[str, Any]] = []
    for o in pages:
        items.extend(o.result.get("data", {}).get("bookings", []))
    return items, (pages[-1] if pages else None)


def _list_step(ctx: ModelContext, last: Observation | None) -> Step | None:
    """The next page to read, if any (at most three pages)."""
    if last is None:
        return Step([Proposal("list_my_bookings", {"limit": PAGE})])
    data = last.result.get("data", {})
    pages = sum(1 for o in ctx.history if o.tool == "list_my_bookings")
    if last.result.get("ok") and data.get("has_more") and data.get("next_cursor") and pages < 3:
        return Step([Proposal("list_my_bookings", {"limit": PAGE, "cursor": data["next_cursor"]})])
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
    items, last = _pages(ctx)
    step = _list_step(ctx, last)
    if step is not None:
        return step
    if last is not None and not last.result.get("ok"):
        return Step(
            message=replies.search_refused(reading.language, last.result),
            outcome=StepOutcome.GAVE_UP,
        )
    chosen = _matching(items, reading, now)
    return Step(
        message=replies.my_bookings(reading.language, chosen, names=names, when=reading.day_window),
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
    if done:
        return Step(outcome=StepOutcome.DONE)
    items, last = _pages(ctx)
    step = _list_step(ctx, last)
    if step is not None:
        return step
    if last is not None and not last.result.get("ok"):
        return Step(
            message=replies.search_refused(language, last.result), outcome=StepOutcome.GAVE_UP
        )
    chosen = _matching(items, reading, now)
    if not chosen:
        return Step(
            message=replies.nothing_to_cancel(language, when=reading.day_window),
            outcome=StepOutcome.ASK_USER,
        )
    if len(chosen) == 1 and reading.ready and "which" not in reading.missing:
        return Step([Proposal("cancel_booking", {"booking_id": chosen[0]["booking_id"]})])
    # Several (or none named): the person confirms the list before anything is cancelled.
    return Step(
        message=replies.confirm_cancel(language, [b["booking_id"] for b in chosen], chosen, names),
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
    bookings = move_bookings(history)
    if bookings is None:
        if ask.code:
            return Step([Proposal("get_booking", {"booking_id": ask.code})])
        return Step([Proposal("list_my_bookings", {"limit": PAGE})])
    plan = resolve_move(ask, bookings, now)
    delegation = ctx.delegation
    granted = "change_booking" in delegation.tools and delegation.max_writes > 0
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
            "attendees": int(plan.booking.get("attendees") or 1),
            "room_id": plan.room,
        },
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
    free = {r["room_id"]: r for r in last.result.get("data", {}).get("rooms", [])}
    room = free.get(plan.room)
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
                },
            )
        ]
    )
