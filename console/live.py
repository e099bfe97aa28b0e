"""The run card's live socket: the engine's trace stream, rendered as the card's fragments."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from accounts.models import Role
from accounts.selectors import user_roles
from agentops.contract import broadcast_listen, broadcast_unlisten
from agentops.live.consumers import RunTraceConsumer
from agentops.selectors import QUEUE_GROUP, may_reconcile
from approvals.live import INBOX_GROUP
from config.websocket import GroupMarks, OneWaySocket
from console.cards import event_fragment


class RunCardConsumer(RunTraceConsumer):
    """``format=html``: each event as the run card's out-of-band fragments; JSON otherwise."""

    def fragment(self, event: dict[str, Any]) -> str | None:
        return event_fragment(event, run_id=self.run_id, language=self.language)


class NavCountsConsumer(OneWaySocket):
    """Every page's navigation counts, live: an approver hears the approvals inbox change, an
    operator the reconciliation queue; the page then re-reads its counts (the database is the
    record; a poke only says "look again"). One-way: nothing a client sends does anything."""

    marks = GroupMarks(listen=broadcast_listen, unlisten=broadcast_unlisten)

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        groups = await database_sync_to_async(_nav_groups)(user)
        if not groups:
            await self.close(code=4403)
            return
        for group in groups:
            await self.join(group)  # listened to first: no poke falls between
        await self.accept()

    async def inbox_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({"changed": "approvals"})

    async def queue_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({"changed": "queue"})


def _nav_groups(user: Any) -> list[str]:
    groups = []
    if Role.APPROVER in user_roles(user=user):
        groups.append(INBOX_GROUP)
    if may_reconcile(user=user):
        groups.append(QUEUE_GROUP)
    return groups
