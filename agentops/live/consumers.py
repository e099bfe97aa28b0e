"""The live trace of a run over a websocket: who may watch a run, and in which form.

The run's owner, an approver who may decide one of its pending approval requests, and admins
may watch; the socket is accepted and then closed with 4401 (not signed in) or 4404 (no such
run, or not one this user may watch: the two read the same). A foreign Origin is refused before
the handshake (config.asgi).

On connect the consumer marks the run watched (a run nobody watches is not pushed), joins the
run's group, then sends every event after the `after` sequence number the page already has (from
the database), then whatever the group pushes, in order and without repeats. The group is only
a fast path. A push that was dropped (the push thread's Redis check failed, the channel layer
lost it) is read on reconnect, or by the open socket itself: it looks in the database for what
it has not sent, RESYNC_FIRST_S after it connected or last heard a push, then at doubling
intervals up to RESYNC_MAX_S while nothing turns up (a card waiting for an approver would
otherwise show a lost event only with the next one, which may be half an hour later). Events go
out as JSON, or with `format=html` as whatever ``fragment`` renders (the console's run card: out
of band swaps for the htmx ws extension, in the page's `lang`). A frame from the page that is
not small JSON text closes the socket (1003, 1007, 1009: config.websocket) and unmarks the run
at once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from agentops import selectors, services
from config.websocket import GroupMarks, OneWaySocket

log = logging.getLogger(__name__)

NOT_SIGNED_IN = 4401
NOT_YOURS = 4404
# The open socket's own look in the database for events a lost push did not bring: this long
# after it connected (or last heard a push), then twice as long each time nothing was missing,
# up to the maximum. One indexed read of a run's newest events, usually empty.
RESYNC_FIRST_S = 5.0
RESYNC_MAX_S = 60.0


class RunTraceConsumer(OneWaySocket):
    marks = GroupMarks(listen=services.run_watch, unlisten=services.run_unwatch)

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
        try:
            self.last_seq = max(0, int(self.query.get("after", "0")))
        except ValueError:
            self.last_seq = 0
        languages = {code for code, _ in settings.LANGUAGES}
        wanted = self.query.get("lang", settings.LANGUAGE_CODE)
        self.language = wanted if wanted in languages else settings.LANGUAGE_CODE
        self.html = self.query.get("format", "") == "html"
        self.run_id = run_id
        self._sending = asyncio.Lock()
        # Watched first, then in the group, then the database: no event falls between. A
        # failure on the way leaves the group and its mark (config.websocket).
        await self.join(selectors.run_group(run_id))
        backlog = await database_sync_to_async(selectors.run_events_after)(
            run_id=self.run_id, after=self.last_seq
        )
        for event in backlog:
            await self._send_event(event)
        self._resync_wait = RESYNC_FIRST_S
        self._resync = asyncio.ensure_future(self._resync_loop())

    async def disconnect(self, code: int) -> None:
        resync = getattr(self, "_resync", None)
        if resync is not None:
            resync.cancel()

    async def trace_batch(self, message: dict[str, Any]) -> None:
        if not hasattr(self, "run_id"):
            return
        self._resync_wait = RESYNC_FIRST_S  # pushes come: the next may be lost as well
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

    async def _resync_loop(self) -> None:
        """Send what is in the database past the last event sent, now and then: a push the
        group lost shows within RESYNC_FIRST_S of the last push heard, or RESYNC_MAX_S at most
        (events are numbered and sent once, so a push and a resync that bring the same event
        send it once, in order)."""
        while True:
            await asyncio.sleep(self._resync_wait)
            resent = 0
            try:
                for event in await database_sync_to_async(selectors.run_events_after)(
                    run_id=self.run_id, after=self.last_seq
                ):
                    resent += await self._send_event(event)
            except Exception:  # the database is away for now: the next look may find it
                log.warning("could not read run %s's events to resync", self.run_id, exc_info=True)
            if resent:
                log.info("run %s: %d events a push did not bring, sent", self.run_id, resent)
                self._resync_wait = RESYNC_FIRST_S
            else:
                self._resync_wait = min(self._resync_wait * 2, RESYNC_MAX_S)

    async def _send_event(self, event: dict[str, Any]) -> bool:
        """Send the event unless it was sent already; whether it was. One at a time: the pushes
        and the resync loop both send, and the page must get them in order."""
        async with self._sending:
            if event["seq"] <= self.last_seq:
                return False
            self.last_seq = event["seq"]
            fragment = self.fragment(event) if self.html else None
            if fragment is not None:
                await self.send(text_data=fragment)
            else:
                await self.send_json(event)
            return True

    def fragment(self, event: dict[str, Any]) -> str | None:
        """The event as the page's HTML fragment (``format=html``), or None to send JSON. The
        screens (``console.live``) render it; the engine knows no HTML."""
        return None
