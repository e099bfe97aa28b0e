"""The shape of our websockets: the server talks, the page listens. What a client sends is read
only to be refused cleanly when it is not a small JSON text frame."""

from __future__ import annotations

import json
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

# RFC 6455 section 7.4.1 close codes.
UNSUPPORTED_DATA = 1003  # a binary frame
INVALID_PAYLOAD = 1007  # text that is not JSON
MESSAGE_TOO_BIG = 1009  # over settings.WEBSOCKET_MAX_MESSAGE_BYTES


class ListeningJsonConsumer(AsyncJsonWebsocketConsumer):
    """A JSON consumer whose client frames are refused, when not small JSON text, with a close
    code, and the consumer ends at once through its own disconnect (groups left, marks such as
    the run's watcher removed): a frame never raises out of it, so no traceback and no stale
    state stays behind. A JSON frame goes to ``receive_json`` as before."""

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

    async def refuse(self, code: int) -> None:
        """Close with ``code`` and end the consumer as a client's disconnect would (raises
        StopConsumer, which Channels takes as the consumer's end)."""
        await self.close(code=code)
        await self.websocket_disconnect({"type": "websocket.disconnect", "code": code})
