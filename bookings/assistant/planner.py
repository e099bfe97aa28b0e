"""The offline planner (default): reads the request, proposes a search, then a reservation of
the smallest fitting room; re-searches after a conflict; retries a timed-out read once."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from agentops.contract import ModelContext, Observation, Proposal, Step, StepOutcome
from bookings.assistant import multiroom, replies
from bookings.assistant.parsing import BookingRequest, parse_booking_request


class RulesPlanner:
    name = "rules"

    def propose(self, ctx: ModelContext) -> Step:
        now = datetime.fromisoformat(ctx.now)
        parsed = parse_booking_request(ctx.goal, now=now, tz=now.tzinfo or ZoneInfo("UTC"))
        if not isinstance(parsed, BookingRequest):
            return Step(message=replies.clarifying_question(parsed), outcome=StepOutcome.ASK_USER)
        if len(parsed.room_codes) > 1:  # several named rooms: one run, one booking per room
            return multiroom.propose(ctx, parsed)
        search = {
            "start_at": parsed.start_at.isoformat(),
            "end_at": parsed.end_at.isoformat(),
            "attendees": parsed.attendees,
            "equipment": list(parsed.equipment),
        }
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
            return Step(
                message=replies.booking_refused(ctx.language, last.result.get("message", "")),
                outcome=StepOutcome.GAVE_UP,
            )
        if last.tool != "find_available_rooms":
            return Step(outcome=StepOutcome.GAVE_UP)
        if not last.result.get("ok"):
            failed_reads = sum(
                1 for o in history if o.tool == "find_available_rooms" and not o.result.get("ok")
            )
            if last.result.get("signal") != "yellow":  # red: retrying cannot help
                return Step(
                    message=replies.search_refused(ctx.language, last.result.get("message", "")),
                    outcome=StepOutcome.GAVE_UP,
                )
            if failed_reads < 2:
                return Step([Proposal("find_available_rooms", search)])  # one more, bounded
            return Step(
                message=replies.search_unverified(ctx.language), outcome=StepOutcome.GAVE_UP
            )
        pick = self._choose(last, reserves, parsed, ctx.subject.get("department", ""))
        if pick is None:
            return Step(
                message=replies.no_room(
                    ctx.language, people=parsed.attendees, equipment=parsed.equipment
                ),
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
    def _choose(
        found: Observation, reserves: list[Observation], parsed: BookingRequest, department: str
    ) -> dict[str, Any] | None:
        # A room whose slot was taken is out. A room refused only for a stale version may be
        # tried again if this newer search still lists it free (with its new version).
        conflicted = {
            o.arguments.get("room_id") for o in reserves if o.result.get("code") == "slot_taken"
        }
        rooms = [
            r
            for r in found.result.get("data", {}).get("rooms", [])
            if r["room_id"] not in conflicted
        ]
        if parsed.room_code:
            rooms = [r for r in rooms if r["room_id"] == parsed.room_code]
        if not rooms:
            return None
        # Smallest fitting room; ordinary rooms of one's own department before ones needing approval.
        return min(
            rooms,
            key=lambda r: (
                r["requires_approval"],
                r["department"] != department,
                r["capacity"],
                int(r["room_id"][1:]),
            ),
        )
