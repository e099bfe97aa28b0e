"""The rules planner's side of a multi-room request ("R7 and R9 tomorrow 14:00-15:00 for a
workshop"): one search, then one reservation per named room, one at a time, each after the
previous one is confirmed. It is all or nothing: when a room cannot be had, the planner gives
up and the runtime releases the rooms already booked (its saga), so it never reports a part."""

from __future__ import annotations

from typing import Any

from agentops.contract import ModelContext, Observation, Proposal, Step, StepOutcome
from bookings.assistant import replies
from bookings.assistant.parsing import BookingRequest

PAGE = 50  # rooms asked of the search (a page holds fewer when its size cap needs)


def propose(ctx: ModelContext, parsed: BookingRequest) -> Step:
    search = {
        "start_at": parsed.start_at.isoformat(),
        "end_at": parsed.end_at.isoformat(),
        "attendees": parsed.attendees or 1,  # no head count: any free room, booked whole
        "equipment": list(parsed.equipment),
        "limit": PAGE,
    }
    history = ctx.history
    booked = {
        o.arguments.get("room_id")
        for o in history
        if o.tool == "reserve_room" and o.result.get("ok")
    }
    remaining = [code for code in parsed.room_codes if code not in booked]
    if not remaining:
        return Step(outcome=StepOutcome.DONE)  # the runtime reports from verified receipts
    if not history:
        return Step([Proposal("find_available_rooms", search)])
    last = history[-1]
    if last.tool == "reserve_room" and not last.result.get("ok"):
        if last.result.get("reason") == "conflict" and last.result.get("code") != "slot_taken":
            return Step([Proposal("find_available_rooms", search)])  # only the version moved
        return Step(
            message=replies.booking_refused(ctx.language, last.result),
            outcome=StepOutcome.GAVE_UP,
        )
    found = _last_search(history)
    if found is None:
        return Step(
            message=replies.search_refused(ctx.language, {"message": last.tool}),
            outcome=StepOutcome.GAVE_UP,
        )
    refused = [o for o in [found, *_searches_since(history, found)] if not o.result.get("ok")]
    if refused:
        return Step(
            message=replies.search_refused(ctx.language, refused[0].result),
            outcome=StepOutcome.GAVE_UP,
        )
    free, unknown = _named_free(history, found, remaining)
    if unknown:  # past the page the search listed: asked about by name
        return Step(
            [
                Proposal("find_available_rooms", search | {"room_id": code, "limit": 1})
                for code in unknown
            ]
        )
    missing = [code for code in remaining if code not in free]
    if (
        missing
    ):  # checked before the first write: nothing is booked for a request that cannot be met
        return Step(
            message=replies.rooms_not_free(ctx.language, rooms=missing),
            outcome=StepOutcome.GAVE_UP,
        )
    return Step([Proposal("reserve_room", _reserve(free[remaining[0]], search, parsed))])


def _last_search(history: list[Observation]) -> Observation | None:
    """The last search of every room (not one asked by name)."""
    return next(
        (
            o
            for o in reversed(history)
            if o.tool == "find_available_rooms" and not o.arguments.get("room_id")
        ),
        None,
    )


def _searches_since(history: list[Observation], found: Observation | None) -> list[Observation]:
    """The searches by name made after the search of every room ``found``."""
    if found is None:
        return []
    after = history[history.index(found) + 1 :]
    return [o for o in after if o.tool == "find_available_rooms" and o.arguments.get("room_id")]


def _named_free(
    history: list[Observation], found: Observation, remaining: list[str]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The named rooms free for the window (each with its version), and those the search's
    page says nothing of: it said has_more, and they were not asked about by name since."""
    data = found.result.get("data", {})
    listed = {r["room_id"]: r for r in data.get("rooms", [])}
    by_name = {
        o.arguments["room_id"]: o.result.get("data", {}).get("named_room") or {}
        for o in _searches_since(history, found)
    }
    free: dict[str, dict[str, Any]] = {}
    unknown = []
    for code in remaining:
        if code in listed:
            free[code] = listed[code]
        elif code in by_name:
            if by_name[code].get("available"):
                free[code] = by_name[code]
        elif data.get("has_more"):
            unknown.append(code)
    return free, unknown


def _reserve(room: dict[str, Any], search: dict[str, Any], parsed: BookingRequest) -> dict:
    return {
        "room_id": room["room_id"],
        "start_at": search["start_at"],
        "end_at": search["end_at"],
        "attendees": parsed.attendees or room["capacity"],
        "equipment": search["equipment"],
        "expected_version": room["version"],
    }
