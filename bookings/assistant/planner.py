"""The offline planner (default): reads the request, proposes a search, then a reservation of
the smallest fitting room; re-searches after a conflict; retries a timed-out read once. When it
books nothing it says what stood in the way, from what the search observed (the named room, the
largest room, a room the person already holds then) or from the refusal."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from agentops.contract import ModelContext, Observation, Proposal, Step, StepOutcome
from bookings.assistant import jobs, multiroom, replies
from bookings.assistant.parsing import BookingRequest
from bookings.assistant.parsing.reading import Job, Reading, read
from bookings.rules import MAX_ATTENDEES

OFFERED = 3  # free rooms named when the requested one cannot be booked


class RulesPlanner:
    name = "rules"
    local = True  # answers in process, from the request and the history (Planner)

    def propose(self, ctx: ModelContext) -> Step:
        from bookings.assistant import conversation_dicts, room_catalogue

        now = datetime.fromisoformat(ctx.now)
        rooms = room_catalogue()
        reading = read(
            ctx.goal,
            now=now,
            tz=now.tzinfo or ZoneInfo("UTC"),
            rooms=rooms,
            conversation=conversation_dicts(ctx.conversation),
        )
        names = {r.code: r.name for r in rooms}
        if reading.job != Job.BOOK:
            return jobs.propose(ctx, reading, names=names, rooms=rooms, now=now)
        question = jobs.booking_question(reading, rooms=rooms, names=names, asker=ctx.subject)
        if question is not None:
            return question
        parsed = _booking(reading)
        if len(parsed.room_codes) > 1:  # several named rooms: one run, one booking per room
            return multiroom.propose(ctx, parsed)
        return self._book(ctx, parsed)

    def _book(self, ctx: ModelContext, parsed: BookingRequest) -> Step:
        search = {
            "start_at": parsed.start_at.isoformat(),
            "end_at": parsed.end_at.isoformat(),
            # More people than any search takes: the search still says how big the rooms are.
            "attendees": min(parsed.attendees or 1, MAX_ATTENDEES),
            "equipment": list(parsed.equipment),
        }
        if parsed.room_code:
            search["room_id"] = parsed.room_code  # the search says what stands in its way
        history = ctx.history
        reserves = [o for o in history if o.tool == "reserve_room"]
        if any(o.result.get("ok") for o in reserves):
            return Step(outcome=StepOutcome.DONE)  # the runtime reports from the verified receipt
        if not history:
            return Step([Proposal("find_available_rooms", search)])
        last = history[-1]
        if last.tool == "reserve_room":
            if last.result.get("reason") == "conflict":
                return Step([Proposal("find_available_rooms", search)])  # the snapshot is stale
            # Refused for a moment (e.g. the rate limiter did not answer; never a write whose
            # outcome is unknown: the runtime reconciles those): look again, a bounded number of
            # times. Refused for the rest of the minute: retrying now cannot help.
            failed = sum(1 for o in reserves if not o.result.get("ok"))
            transient = last.result.get("signal") == "yellow"
            if transient and last.result.get("reason") != "rate_limited" and failed < 3:
                return Step([Proposal("find_available_rooms", search)])
            return self._refused(ctx, parsed, last.result, replies.booking_refused)
        if last.tool != "find_available_rooms":
            return Step(outcome=StepOutcome.GAVE_UP)
        if not last.result.get("ok"):
            failed_reads = sum(
                1 for o in history if o.tool == "find_available_rooms" and not o.result.get("ok")
            )
            # Red, or refused for the rest of the minute: retrying now cannot help.
            retryable = last.result.get("signal") == "yellow"
            if not retryable or last.result.get("reason") == "rate_limited":
                return self._refused(ctx, parsed, last.result, replies.search_refused)
            if failed_reads < 2:
                return Step([Proposal("find_available_rooms", search)])  # one more, bounded
            return Step(
                message=replies.search_unverified(ctx.language), outcome=StepOutcome.GAVE_UP
            )
        own = last.result.get("data", {}).get("own_bookings") or []
        if own and not parsed.another_room:
            # A second room at the same time is nearly always a mistake (a repeated request, a
            # forgotten booking): ask instead of booking.
            return Step(
                message=replies.already_holding(ctx.language, own), outcome=StepOutcome.ASK_USER
            )
        department = ctx.subject.get("department", "")
        pick = self._choose(last, reserves, parsed, department)
        if pick is None:
            return Step(
                message=self._nothing_fits(ctx.language, last, reserves, parsed, department),
                outcome=StepOutcome.GAVE_UP,
            )
        return Step(
            [
                Proposal(
                    "reserve_room",
                    {
                        "room_id": pick["room_id"],
                        "start_at": search["start_at"],
                        "end_at": search["end_at"],
                        "attendees": parsed.attendees,
                        "equipment": search["equipment"],
                        "expected_version": pick["version"],
                    },
                )
            ]
        )

    @staticmethod
    def _refused(ctx: ModelContext, parsed: BookingRequest, envelope: dict, worded) -> Step:
        """A tool refused: say what stood in the way, in the person's language."""
        if envelope.get("reason") == "rate_limited":
            message = replies.too_many_requests(
                ctx.language, retry_after_ms=envelope.get("retry_after_ms")
            )
        elif envelope.get("code") == "start_in_past":
            message = replies.in_the_past(
                ctx.language, start_at=parsed.start_at, end_at=parsed.end_at
            )
        else:
            message = worded(ctx.language, envelope)
        return Step(message=message, outcome=StepOutcome.GAVE_UP)

    @staticmethod
    def _nothing_fits(
        language: str,
        found: Observation,
        reserves: list[Observation],
        parsed: BookingRequest,
        department: str,
    ) -> str:
        """Why no room was booked, from what the search observed."""
        data = found.result.get("data", {})
        named = data.get("named_room")
        if parsed.room_code and named:
            offer = _ranked(_free(found, reserves), department)
            return replies.named_room_unavailable(
                language,
                named=named,
                people=parsed.attendees,
                equipment=parsed.equipment,
                taken_meanwhile=parsed.room_code in _conflicted(reserves),
                offer=[r["room_id"] for r in offer if r["room_id"] != named["room_id"]][:OFFERED],
            )
        largest = data.get("largest_capacity")
        if largest is not None and parsed.attendees > largest:
            return replies.too_many_people(language, people=parsed.attendees, largest=largest)
        return replies.no_room(language, people=parsed.attendees, equipment=parsed.equipment)

    @staticmethod
    def _choose(
        found: Observation, reserves: list[Observation], parsed: BookingRequest, department: str
    ) -> dict[str, Any] | None:
        rooms = _free(found, reserves)
        if parsed.department:  # "an eng room": only that department's rooms
            rooms = [r for r in rooms if r["department"] == parsed.department]
        if parsed.room_code:
            rooms = [r for r in rooms if r["room_id"] == parsed.room_code]
            # The search named it: named_room says whether it can be had, wherever it sorts
            # among the free rooms (this page of them may stop before it).
            named = found.result.get("data", {}).get("named_room") or {}
            taken = parsed.room_code in _conflicted(reserves)
            if not rooms and named.get("room_id") == parsed.room_code and not taken:
                rooms = [named] if named.get("available") else []
            return rooms[0] if rooms else None
        ranked = _ranked(rooms, department)
        return ranked[0] if ranked else None


def _conflicted(reserves: list[Observation]) -> set[str]:
    return {o.arguments.get("room_id") for o in reserves if o.result.get("code") == "slot_taken"}


def _free(found: Observation, reserves: list[Observation]) -> list[dict[str, Any]]:
    """The rooms the search found free. A room whose slot was taken is out; a room refused only
    for a stale version may be tried again if this newer search lists it (with its new version)."""
    conflicted = _conflicted(reserves)
    rooms = found.result.get("data", {}).get("rooms", [])
    return [r for r in rooms if r["room_id"] not in conflicted]


def _ranked(rooms: list[dict[str, Any]], department: str) -> list[dict[str, Any]]:
    """Smallest fitting room first; ordinary rooms of one's own department before ones needing
    approval."""
    return sorted(
        rooms,
        key=lambda r: (
            r["requires_approval"],
            r["department"] != department,
            r["capacity"],
            int(r["room_id"][1:]),
        ),
    )


def _booking(reading: Reading) -> BookingRequest:
    frame = reading.frame
    if reading.start_at is None or reading.end_at is None:
        raise ValueError("a booking reading without its window")
    several = len(frame.rooms) > 1
    return BookingRequest(
        start_at=reading.start_at,
        end_at=reading.end_at,
        attendees=frame.attendees,
        equipment=frame.equipment,
        room_code=frame.rooms[0] if frame.rooms else None,
        language=reading.language,
        another_room=frame.another_room,
        room_codes=frame.rooms if several else (),
        department=frame.department,
    )
