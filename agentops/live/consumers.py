"""The live trace of a run over a websocket: the owner's session only.

On connect the consumer joins the run's group first, then sends every event after the `after`
sequence number the page already has (from the database), then whatever the group pushes, in
order and without repeats. The group is only a fast path: a dropped push is read on reconnect.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agentops import selectors
from agentops.trace import run_group

NOT_SIGNED_IN = 4401
NOT_YOURS = 4404


class RunTraceConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        self.run_id = str(self.scope["url_route"]["kwargs"]["run_id"])
        if (
            await database_sync_to_async(selectors.run_get_for_user)(run_id=self.run_id, user=user)
            is None
        ):
            await self.close(code=NOT_YOURS)  # someone else's run reads as absent
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_seq = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_seq = 0
        await self.channel_layer.group_add(run_group(self.run_id), self.channel_name)
        await self.accept()
        backlog = await database_sync_to_async(selectors.run_events_after)(
            run_id=self.run_id, after=self.last_seq
        )
        for event in backlog:
            await self._send_event(event)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "run_id"):
            await self.channel_layer.group_discard(run_group(self.run_id), self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The stream is one-way: nothing a client sends changes a run."""

    async def trace_batch(self, message: dict[str, Any]) -> None:
        for event in message["events"]:
            await self._receive_event(event)

    async def _receive_event(self, event: dict[str, Any]) -> None:
        if event["seq"] > self.last_seq + 1:
            # Something was dropped (or arrived out of order): catch up from the database.
            for missed in await database_sync_to_async(selectors.run_events_after)(
                run_id=self.run_id, after=self.last_seq
            ):
                await self._send_event(missed)
        await self._send_event(event)

    async def _send_event(self, event: dict[str, Any]) -> None:
        if event["seq"] <= self.last_seq:
            return
        self.last_seq = event["seq"]
        await self.send_json(event)
