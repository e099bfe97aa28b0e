"""The live trace of a run over a websocket: who may watch a run, and in which form.

The run's owner, an approver who may decide one of its pending approval requests, and admins
may watch; the socket is accepted and then closed with 4401 (not signed in) or 4404 (no such
run, or not one this user may watch: the two read the same). A foreign Origin is refused before
the handshake (config.asgi).

On connect the consumer marks the run watched (a run nobody watches is not pushed), joins the
run's group, then sends every event after the `after` sequence number the page already has (from
the database), then whatever the group pushes, in order and without repeats. The group is only
a fast path: a dropped push is read on reconnect. Events go out as JSON, or with `format=html`
as whatever ``fragment`` renders (the console's run card: out of band swaps for the htmx ws
extension, in the page's `lang`). A frame from the page that is not small JSON text closes the
socket (1003, 1007, 1009: config.websocket) and unmarks the run at once.
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings

from agentops import selectors, services
from config.websocket import ListeningJsonConsumer

NOT_SIGNED_IN = 4401
NOT_YOURS = 4404


class RunTraceConsumer(ListeningJsonConsumer):
    async def connect(self) -> None:
        # Accept first, so that a refusal is a close code the page can read (a refused
        # handshake is only an HTTP 403 to the browser).
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        run_id = str(self.scope["url_route"]["kwargs"]["run_id"])
        run = await database_sync_to_async(selectors.run_get_for_viewer)(run_id=run_id, user=user)
        if run is None:
            await self.close(code=NOT_YOURS)  # someone else's run reads as absent
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_seq = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_seq = 0
        languages = {code for code, _ in settings.LANGUAGES}
        wanted = query.get("lang", [settings.LANGUAGE_CODE])[0]
        self.language = wanted if wanted in languages else settings.LANGUAGE_CODE
        self.html = query.get("format", [""])[0] == "html"
        self.run_id = run_id
        # Watched first, then in the group, then the database: no event falls between.
        await sync_to_async(services.run_watch, thread_sensitive=False)(
            selectors.run_group(run_id), self.channel_name
        )
        try:
            await self.channel_layer.group_add(selectors.run_group(self.run_id), self.channel_name)
            backlog = await database_sync_to_async(selectors.run_events_after)(
                run_id=self.run_id, after=self.last_seq
            )
            for event in backlog:
                await self._send_event(event)
        except BaseException:  # no disconnect follows a failed connect: leave no mark behind
            with contextlib.suppress(Exception):
                await self._leave()
            raise

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "run_id"):
            await self._leave()

    async def _leave(self) -> None:
        group = selectors.run_group(self.run_id)
        await self.channel_layer.group_discard(group, self.channel_name)
        await sync_to_async(services.run_unwatch, thread_sensitive=False)(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The stream is one-way: nothing a client sends changes a run."""

    async def trace_batch(self, message: dict[str, Any]) -> None:
        if not hasattr(self, "run_id"):
            return
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
        fragment = self.fragment(event) if self.html else None
        if fragment is not None:
            await self.send(text_data=fragment)
        else:
            await self.send_json(event)

    def fragment(self, event: dict[str, Any]) -> str | None:
        """The event as the page's HTML fragment (``format=html``), or None to send JSON. The
        screens (``console.live``) render it; the engine knows no HTML."""
        return None
