"""The inbox updates live: every opened or settled request pokes the approvers' group, and an
open inbox page re-reads its pending list (htmx) when poked. The database stays the record: a
lost poke costs freshness, never a decision."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction

from accounts.models import Role
from accounts.selectors import user_roles
from config.websocket import ListeningJsonConsumer

INBOX_GROUP = "approvals.inbox"
NOT_SIGNED_IN = 4401
NOT_AN_APPROVER = 4403


def inbox_poke() -> None:
    """After the caller's commit, tell open inboxes to re-read."""

    def send() -> None:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(INBOX_GROUP, {"type": "inbox.changed"})

    transaction.on_commit(send, robust=True)


class InboxConsumer(ListeningJsonConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        roles = await database_sync_to_async(user_roles)(user=user)
        if Role.APPROVER not in roles:
            await self.close(code=NOT_AN_APPROVER)
            return
        await self.channel_layer.group_add(INBOX_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(INBOX_GROUP, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """One-way: nothing a client sends decides anything."""

    async def inbox_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({"changed": True})
