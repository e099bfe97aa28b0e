"""The day view updates live: every committed schedule write pokes the groups of the days and
rooms it touched, and an open day view (or room week) re-reads its grid when poked. The database
stays the record: a lost poke costs freshness, never a booking."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from django.db import transaction
from django.utils import timezone

from agentops.contract import broadcast, broadcast_listen, broadcast_unlisten
from bookings.models import Booking, Room
from bookings.notices import user_group

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


class ScheduleConsumer(AsyncWebsocketConsumer):
    """``/ws/schedule/?day=YYYY-MM-DD`` or ``?room=R3``: one-way pokes for signed-in people.
    A poke says only "look again"; what the page then shows is what the person may see."""

    groups_joined: list[str]

    async def connect(self) -> None:
        self.groups_joined = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        group = _topic(self.scope.get("query_string", b"").decode("ascii", "replace"))
        if group is None:
            await self.close(code=BAD_TOPIC)
            return
        self.groups_joined = [group]
        await _listen(group, self.channel_name)  # first: no poke falls between
        await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)
            await _unlisten(group, self.channel_name)

    async def receive(self, text_data: Any = None, bytes_data: Any = None) -> None:
        """One-way: nothing a client sends decides anything."""

    async def schedule_changed(self, message: dict[str, Any]) -> None:
        await self.send(text_data=CHANGED)


async def _listen(group: str, channel: str) -> None:
    """Pokes are sent only to groups someone listens to (agentops.contract.broadcast)."""
    await sync_to_async(broadcast_listen, thread_sensitive=False)(group, channel)


async def _unlisten(group: str, channel: str) -> None:
    await sync_to_async(broadcast_unlisten, thread_sensitive=False)(group, channel)


def _topic(query: str) -> str | None:
    params = parse_qs(query, max_num_fields=4)
    if "day" in params:
        try:
            return day_group(date.fromisoformat(params["day"][0][:10]))
        except ValueError:
            return None
    if "room" in params and _ROOM.match(params["room"][0]):
        return room_group(params["room"][0])
    return None


# --- My bookings, live: a socket per signed-in person (bookings.notices pokes it) ----------


class MyBookingsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        self.group = user_group(user.pk)
        await _listen(self.group, self.channel_name)  # first: no poke falls between
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        group = getattr(self, "group", None)
        if group is not None:
            await self.channel_layer.group_discard(group, self.channel_name)
            await _unlisten(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """One-way: nothing a client sends decides anything."""

    async def bookings_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({"changed": True, "notice": message.get("notice", "")})
