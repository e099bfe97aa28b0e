"""The day view updates live: every committed schedule write pokes the groups of the days and
rooms it touched, and an open day view (or room week) re-reads its grid when poked. The database
stays the record: a lost poke costs freshness, never a booking."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentops.contract import broadcast, broadcast_listen, broadcast_unlisten
from bookings.models import Booking, Room
from bookings.notices import user_group
from config.websocket import GroupMarks, OneWaySocket

NOT_SIGNED_IN = 4401
BAD_TOPIC = 4400
_ROOM = re.compile(r"^R\d{1,4}$")
# What the socket sends: an element the page already has, swapped out of band; the grid
# re-reads itself on the ws extension's htmx:wsAfterMessage (the message carries no schedule).
CHANGED = '<span id="schedule-changed" hx-swap-oob="true" hidden></span>'


def day_group(day: date) -> str:
    return f"schedule.day.{day.isoformat()}"


def room_group(code: str) -> str:
    return f"schedule.room.{code}"


def _days(start: datetime, end: datetime) -> list[date]:
    first = timezone.localtime(start).date()
    last = timezone.localtime(end - timedelta(microseconds=1)).date()
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def schedule_changed(changes: Iterable[tuple[str, datetime, datetime]]) -> None:
    """After the caller's commit, poke the day and room groups of each (room, start, end)."""
    groups = set()
    for code, start, end in changes:
        groups.add(room_group(code))
        groups.update(day_group(d) for d in _days(start, end))

    def after_commit() -> None:  # sent by the runtime's pushing thread: never blocks here
        for group in sorted(groups):
            broadcast(group, {"type": "schedule.changed"})

    transaction.on_commit(after_commit, robust=True)


def bookings_changed(bookings: Sequence[Booking]) -> None:
    """schedule_changed for these bookings' windows, each in its own room (a series' meetings
    may have been moved to other rooms): one query for the rooms' codes, none when empty."""
    if not bookings:
        return
    codes = dict(
        Room.objects.filter(pk__in={b.room_id for b in bookings}).values_list("pk", "code")
    )
    schedule_changed((codes[b.room_id], b.start_at, b.end_at) for b in bookings)


class ScheduleConsumer(OneWaySocket):
    """``/ws/schedule/?day=YYYY-MM-DD`` or ``?room=R3``: one-way pokes for signed-in people.
    A poke says only "look again"; what the page then shows is what the person may see."""

    marks = GroupMarks(listen=broadcast_listen, unlisten=broadcast_unlisten)

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        group = _topic(self.query)
        if group is None:
            await self.close(code=BAD_TOPIC)
            return
        await self.join(group)  # listened to first: no poke falls between
        await self.accept()

    async def schedule_changed(self, message: dict[str, Any]) -> None:
        await self.send(text_data=CHANGED)


def _topic(query: dict[str, str]) -> str | None:
    if "day" in query:
        try:
            return day_group(date.fromisoformat(query["day"][:10]))
        except ValueError:
            return None
    if "room" in query and _ROOM.match(query["room"]):
        return room_group(query["room"])
    return None


# --- My bookings, live: a socket per signed-in person (bookings.notices pokes it) ----------


class MyBookingsConsumer(OneWaySocket):
    marks = GroupMarks(listen=broadcast_listen, unlisten=broadcast_unlisten)

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        await self.join(user_group(user.pk))  # listened to first: no poke falls between
        await self.accept()

    async def bookings_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({"changed": True, "notice": message.get("notice", "")})
