"""The offline planner (default): reads the request, proposes a search, then a reservation of
the smallest fitting room; re-searches after a conflict; retries a timed-out read once."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from agentops.planners.base import ModelContext, Observation, Proposal, Step
from agentops.planners.parsing import BookingRequest, parse_booking_request

MESSAGES = {
    "en": {
        "no_room": "No room fits {people} people{equipment} for that time. Try another time?",
        "unverified": "I could not verify availability (the room search did not answer), so I booked nothing.",
        "search_refused": "The room search was refused: {message}",
        "refused": "The booking was refused: {message}",
    },
    "zh": {
        "no_room": "该时段没有可容纳 {people} 人{equipment}的会议室，换个时间试试？",
        "unverified": "无法核实空闲情况（查询会议室超时），本次没有预订。",
        "search_refused": "查询会议室被拒绝：{message}",
        "refused": "预订被拒绝：{message}",
    },
}


EQUIPMENT_ZH = {
    "projector": "投影",
    "whiteboard": "白板",
    "video": "视频会议",
    "phone": "电话",
    "display": "显示屏",
}


def _say(language: str, key: str, **kw: Any) -> str:
    return MESSAGES["zh" if language == "zh" else "en"][key].format(**kw)


class RulesPlanner:
    name = "rules"

    def propose(self, ctx: ModelContext) -> Step:
        now = datetime.fromisoformat(ctx.now)
        parsed = parse_booking_request(ctx.goal, now=now, tz=now.tzinfo or ZoneInfo("UTC"))
        if not isinstance(parsed, BookingRequest):
            return Step(message=parsed.question, outcome="ask_user")
        search = {
            "start_at": parsed.start_at.isoformat(),
            "end_at": parsed.end_at.isoformat(),
            "attendees": parsed.attendees,
            "equipment": list(parsed.equipment),
        }
        history = ctx.history
        reserves = [o for o in history if o.tool == "reserve_room"]
        if any(o.result.get("ok") for o in reserves):
            return Step(outcome="done")  # the runtime reports from the verified receipt
        if not history:
            return Step([Proposal("find_available_rooms", search)])
        last = history[-1]
        if last.tool == "reserve_room":
            if last.result.get("reason") == "conflict":
                return Step([Proposal("find_available_rooms", search)])  # the snapshot is stale
            return Step(
                message=_say(ctx.language, "refused", message=last.result.get("message", "")),
                outcome="gave_up",
            )
        if last.tool != "find_available_rooms":
            return Step(outcome="gave_up")
        if not last.result.get("ok"):
            failed_reads = sum(
                1 for o in history if o.tool == "find_available_rooms" and not o.result.get("ok")
            )
            if last.result.get("signal") != "yellow":  # red: retrying cannot help
                return Step(
                    message=_say(
                        ctx.language, "search_refused", message=last.result.get("message", "")
                    ),
                    outcome="gave_up",
                )
            if failed_reads < 2:
                return Step([Proposal("find_available_rooms", search)])  # one more, bounded
            return Step(message=_say(ctx.language, "unverified"), outcome="gave_up")
        pick = self._choose(last, reserves, parsed, ctx.subject.get("department", ""))
        if pick is None:
            if ctx.language == "zh":
                equipment = "、".join(EQUIPMENT_ZH.get(e, e) for e in parsed.equipment)
                suffix = f"、带{equipment}" if equipment else ""
            else:
                equipment = ", ".join(parsed.equipment)
                suffix = f" with {equipment}" if equipment else ""
            return Step(
                message=_say(ctx.language, "no_room", people=parsed.attendees, equipment=suffix),
                outcome="gave_up",
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
