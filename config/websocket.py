"""The one base of our websockets (``OneWaySocket``): the server talks, the page listens, and
whatever a client sends wrong is refused with a close code, never a traceback.

- The query string is read here, once, for every socket: text (UTF-8), at most
  ``MAX_QUERY_BYTES`` and ``MAX_QUERY_FIELDS`` fields; anything else closes the handshake with
  4400 before the socket's own ``connect`` runs. ``self.query`` holds each field's first value.
- A client frame is read only to be refused when it is not small JSON text: binary 1003, not
  JSON 1007, over ``settings.WEBSOCKET_MAX_MESSAGE_BYTES`` 1009 (RFC 6455 section 7.4.1); the
  consumer then ends at once through its disconnect. JSON goes to ``receive_json``, which does
  nothing unless a socket says otherwise.
- A socket joins its groups with ``join``; they are left, and their listening marks removed,
  whenever the socket ends (the client went, a frame was refused, ``connect`` failed half-way),
  each one even when another one fails. ``disconnect`` is only for a socket's own extras.
- A path no socket serves is closed at the handshake by ``config.security.no_such_socket``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import parse_qsl

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

log = logging.getLogger(__name__)

# RFC 6455 section 7.4.1 close codes.
UNSUPPORTED_DATA = 1003  # a binary frame
INVALID_PAYLOAD = 1007  # text that is not JSON
MESSAGE_TOO_BIG = 1009  # over settings.WEBSOCKET_MAX_MESSAGE_BYTES
# Ours (4000-4999): a query string that is not one a page of ours sends.
BAD_QUERY = 4400
MAX_QUERY_BYTES = 1024
MAX_QUERY_FIELDS = 8  # our pages send three at most (a run card's after, format, lang)


class BadQueryError(ValueError):
    """The query string is not text, too long, or has too many fields."""


def query_fields(raw: bytes) -> dict[str, str]:
    """Each field's first value; BadQueryError for a query string no page of ours sends."""
    if len(raw) > MAX_QUERY_BYTES:
        raise BadQueryError("query string too long")
    try:
        pairs = parse_qsl(
            raw.decode("utf-8"),
            keep_blank_values=True,
            max_num_fields=MAX_QUERY_FIELDS,
            errors="strict",
        )
    except ValueError as exc:  # not UTF-8 (raw or %-escaped), too many fields
        raise BadQueryError(str(exc)) from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        fields.setdefault(name, value)
    return fields


@dataclass(frozen=True)
class GroupMarks:
    """How a socket marks a group listened to before it joins, and unmarks it after leaving
    (blocking functions of (group, channel), run in a thread): pokes go only to marked groups."""

    listen: Callable[[str, str], None]
    unlisten: Callable[[str, str], None]


class OneWaySocket(AsyncJsonWebsocketConsumer):
    """The base of every socket of ours (see the module). A socket sets ``marks``, reads
    ``self.query`` in ``connect``, joins its groups with ``join``."""

    marks: ClassVar[GroupMarks | None] = None
    query: dict[str, str]
    joined: list[str]

    async def websocket_connect(self, message: dict[str, Any]) -> None:
        self.joined = []
        try:
            self.query = query_fields(self.scope.get("query_string", b""))
        except BadQueryError:
            await self.close(code=BAD_QUERY)
            return
        try:
            await super().websocket_connect(message)
        except BaseException:  # no disconnect follows a failed connect: leave no mark behind
            await self._leave_all()
            raise

    async def join(self, group: str) -> None:
        """Mark ``group`` listened to (first: no poke falls between), then join it; it is left
        when the socket ends, whatever ends it."""
        self.joined.append(group)
        if self.marks is not None:
            await sync_to_async(self.marks.listen, thread_sensitive=False)(group, self.channel_name)
        await self.channel_layer.group_add(group, self.channel_name)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        try:
            await super().websocket_disconnect(message)  # the socket's disconnect; StopConsumer
        finally:
            await self._leave_all()

    async def _leave_all(self) -> None:
        joined, self.joined = getattr(self, "joined", []), []
        for group in joined:  # each one, even when another fails (a fault of ours or Redis's)
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:
                log.warning("socket %s could not leave %s", self.channel_name, group, exc_info=True)
            if self.marks is None:
                continue
            try:
                await sync_to_async(self.marks.unlisten, thread_sensitive=False)(
                    group, self.channel_name
                )
            except Exception:  # the mark expires on its own
                log.warning(
                    "socket %s could not unmark %s", self.channel_name, group, exc_info=True
                )

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        if text_data is None:
            return await self.refuse(UNSUPPORTED_DATA)
        if len(text_data.encode("utf-8", "surrogatepass")) > settings.WEBSOCKET_MAX_MESSAGE_BYTES:
            return await self.refuse(MESSAGE_TOO_BIG)
        try:
            content = json.loads(text_data)
        except (ValueError, RecursionError):
            return await self.refuse(INVALID_PAYLOAD)
        return await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """One-way: nothing a client sends decides anything."""

    async def refuse(self, code: int) -> None:
        """Close with ``code`` and end the consumer as a client's disconnect would (raises
        StopConsumer, which Channels takes as the consumer's end)."""
        await self.close(code=code)
        await self.websocket_disconnect({"type": "websocket.disconnect", "code": code})
