"""The inbox updates live: every opened or settled request pokes the approvers' group, and an
open inbox page re-reads its pending list (htmx) when poked. The database stays the record: a
lost poke costs freshness, never a decision.

The poke goes through the runtime's pushing thread when it is installed (approvals.hooks): the
commit never waits for Redis, the channel layer's connection is that thread's one, and a group
no socket listens to costs one EXISTS. Sent from the caller's thread with ``async_to_sync``
instead, each poke opened a new event loop and a new Redis connection: 6-7 ms of CPU each, three
per approved booking (bench/README.md, "Issue 25, third pass")."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction

from accounts.models import Role
from accounts.selectors import user_roles
from approvals.hooks import group_listen, group_unlisten, installed_broadcast
from config.websocket import GroupMarks, OneWaySocket

INBOX_GROUP = "approvals.inbox"
INBOX_CHANGED = {"type": "inbox.changed"}
NOT_SIGNED_IN = 4401
NOT_AN_APPROVER = 4403


def inbox_poke() -> None:
    """After the caller's commit, tell open inboxes (and approvers' navigation) to re-read."""
    broadcast = installed_broadcast()
    if broadcast is not None:
        transaction.on_commit(lambda: broadcast(INBOX_GROUP, dict(INBOX_CHANGED)), robust=True)
        return

    def send() -> None:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(INBOX_GROUP, dict(INBOX_CHANGED))

    transaction.on_commit(send, robust=True)


class InboxConsumer(OneWaySocket):
    marks = GroupMarks(listen=group_listen, unlisten=group_unlisten)

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        roles = await database_sync_to_async(user_roles)(user=user)
        if Role.APPROVER not in roles:
            await self.close(code=NOT_AN_APPROVER)
            return
        await self.join(INBOX_GROUP)  # listened to first: no poke falls between
        await self.accept()

    async def inbox_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({"changed": True})
