"""What approvals asks the runtime without importing it: the runtime installs these at start-up
(agentops' AppConfig.ready).

- ``recheck(action_ref=, signed_binding=)``: what would stop the action succeeding if approved
  now, as stored messages (``{"msgid", "params"}``); empty when it can still succeed.
- ``outcomes(action_refs=)``: what became of approved actions, ``{ref: {"state", "message"}}``.
- ``broadcast(group, message)``, ``listen(group, channel)``, ``unlisten(group, channel)``: the
  runtime's one pushing thread (agentops.contract.broadcast and its listeners). A poke goes out
  in the background, and only to a group some socket listens to.

Without an installed runtime (approvals on its own), nothing is in the way and no outcome is
known: the screens then show the decision alone, and a poke is sent straight to the channel
layer."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Recheck = Callable[..., list[dict[str, Any]]]
Outcomes = Callable[..., dict[str, dict[str, Any]]]
Broadcast = Callable[[str, dict[str, Any]], None]
Listener = Callable[[str, str], None]
_installed: dict[str, Any] = {}


def hooks_install(
    *,
    recheck: Recheck,
    outcomes: Outcomes,
    broadcast: Broadcast | None = None,
    listen: Listener | None = None,
    unlisten: Listener | None = None,
) -> None:
    _installed.update(recheck=recheck, outcomes=outcomes)
    if broadcast is not None and listen is not None and unlisten is not None:
        _installed.update(broadcast=broadcast, listen=listen, unlisten=unlisten)


def installed_broadcast() -> Broadcast | None:
    """The runtime's background broadcaster, or None (approvals on its own)."""
    return _installed.get("broadcast")


def group_listen(group: str, channel: str) -> None:
    """A socket is about to join ``group`` (blocking: call it from a thread)."""
    listen = _installed.get("listen")
    if listen is not None:
        listen(group, channel)


def group_unlisten(group: str, channel: str) -> None:
    """A socket has left ``group``."""
    unlisten = _installed.get("unlisten")
    if unlisten is not None:
        unlisten(group, channel)


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
