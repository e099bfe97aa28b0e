"""What approvals asks the runtime without importing it: the runtime installs these at start-up
(agentops' AppConfig.ready).

- ``recheck(action_ref=, signed_binding=)``: what would stop the action succeeding if approved
  now, as stored messages (``{"msgid", "params"}``); empty when it can still succeed.
- ``outcomes(action_refs=)``: what became of approved actions, ``{ref: {"state", "message"}}``.

Without an installed runtime (approvals on its own), nothing is in the way and no outcome is
known: the screens then show the decision alone."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Recheck = Callable[..., list[dict[str, Any]]]
Outcomes = Callable[..., dict[str, dict[str, Any]]]
_installed: dict[str, Any] = {}


def hooks_install(*, recheck: Recheck, outcomes: Outcomes) -> None:
    _installed.update(recheck=recheck, outcomes=outcomes)


def request_recheck(request: Any) -> list[dict[str, Any]]:
    """The problems a pending request's action would meet now (empty: none found)."""
    recheck = _installed.get("recheck")
    if recheck is None:
        return []
    return recheck(action_ref=request.action_ref, signed_binding=request.binding)


def request_outcomes(requests: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """The outcome of each approved (or stale) request's action, by action reference."""
    outcomes = _installed.get("outcomes")
    refs = [r.action_ref for r in requests]
    if outcomes is None or not refs:
        return {}
    return outcomes(action_refs=refs)
