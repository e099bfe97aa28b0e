"""The rules planner's side of a multi-room request ("R7 and R9 tomorrow 14:00-15:00 for a
workshop"): one search, then one reservation per named room, one at a time, each after the
previous one is confirmed. It is all or nothing: when a room cannot be had, the planner gives
up and the runtime releases the rooms already booked (its saga), so it never reports a part."""

from __future__ import annotations

from typing import Any

from agentops.contract import ModelContext, Observation, Proposal, Step, StepOutcome
from bookings.assistant import replies
from bookings.assistant.parsing import BookingRequest


def propose(ctx: ModelContext, parsed: BookingRequest) -> Step:
    search = {
        "start_at": parsed.start_at.isoformat(),
        "end_at": parsed.end_at.isoformat(),
        "attendees": parsed.attendees or 1,  # no head count: any free room, booked whole
        "equipment": list(parsed.equipment),
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
    if found is None or not found.result.get("ok"):
        envelope = found.result if found else {"message": last.tool}
        return Step(
            message=replies.search_refused(ctx.language, envelope), outcome=StepOutcome.GAVE_UP
        )
    free = {r["room_id"]: r for r in found.result.get("data", {}).get("rooms", [])}
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
    return next((o for o in reversed(history) if o.tool == "find_available_rooms"), None)


def _reserve(room: dict[str, Any], search: dict[str, Any], parsed: BookingRequest) -> dict:
    return {
        "room_id": room["room_id"],
        "start_at": search["start_at"],
        "end_at": search["end_at"],
        "attendees": parsed.attendees or room["capacity"],
        "equipment": search["equipment"],
        "expected_version": room["version"],
    }
