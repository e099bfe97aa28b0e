"""The run card's live socket: the engine's trace stream, rendered as the card's fragments."""

from __future__ import annotations

from typing import Any

from agentops.live.consumers import RunTraceConsumer
from console.cards import event_fragment


class RunCardConsumer(RunTraceConsumer):
    """``format=html``: each event as the run card's out-of-band fragments; JSON otherwise."""

    def fragment(self, event: dict[str, Any]) -> str | None:
        return event_fragment(event, run_id=self.run_id, language=self.language)
