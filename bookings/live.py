"""The live side of My bookings: a socket per signed-in person, in their own group; notices
(bookings.notices.notify) poke it after commit, and the page re-reads its list."""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from bookings.notices import user_group

NOT_SIGNED_IN = 4401


class MyBookingsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        self.group = user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        group = getattr(self, "group", None)
        if group is not None:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """One-way: nothing a client sends decides anything."""

    async def bookings_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({"changed": True, "notice": message.get("notice", "")})
