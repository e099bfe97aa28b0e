"""The doors for a domain's own screens into the runtime, which installs itself here at
start-up (a domain app never imports the runtime):

- ``governed_call``: a governed call, with the same gate, policy, approvals, idempotency and
  trace as the assistant and the API;
- ``broadcast``: a message to a channel-layer group (a screen's live poke), sent in the
  background by the runtime's one pushing thread: lossy, it never blocks the caller; sent only
  to a group some consumer listens to (``broadcast_listen``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Governor = Callable[..., dict[str, Any]]
_installed: list[Governor] = []


def install_governor(governor: Governor) -> None:
    _installed[:] = [governor]


def governed_call(
    *, user: Any, tool: str, arguments: dict[str, Any], idempotency_key: str | None = None
) -> dict[str, Any]:
    """Call ``tool`` for ``user`` through the runtime; returns its envelope (a pending
    approval included: ``code == "approval_pending"``)."""
    if not _installed:
        raise RuntimeError("no governor installed: is agentops in INSTALLED_APPS?")
    return _installed[0](
        user=user,
        name=tool,
        arguments=arguments,
        idempotency_key=idempotency_key,
        channel="web",
    )


Broadcaster = Callable[[str, dict[str, Any]], None]
Listener = Callable[[str, str], None]  # (group, channel name)
_broadcasters: list[Broadcaster] = []
_listeners: list[tuple[Listener, Listener]] = []


def install_broadcaster(
    broadcaster: Broadcaster, *, listen: Listener | None = None, unlisten: Listener | None = None
) -> None:
    _broadcasters[:] = [broadcaster]
    _listeners[:] = [(listen, unlisten)] if listen is not None and unlisten is not None else []


def broadcast(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to channel-layer ``group`` in the background; call it after your
    commit. Only a group some consumer listens to is sent to (``broadcast_listen``): a poke
    nobody can hear costs nothing. Nothing installed (a script without the runtime): nothing is
    sent."""
    if _broadcasters:
        _broadcasters[0](group, message)


def broadcast_listen(group: str, channel: str) -> None:
    """Mark ``group`` listened to by ``channel``: a consumer calls it (blocking: from a thread)
    before it joins the group, so every broadcast after that reaches it."""
    if _listeners:
        _listeners[0][0](group, channel)


def broadcast_unlisten(group: str, channel: str) -> None:
    """``channel`` left ``group`` (after the consumer's group_discard)."""
    if _listeners:
        _listeners[0][1](group, channel)


# --- the end of a run, announced to the domain -------------------------------------------------
# A domain that tells people what became of their requests (bookings: "approved, but not
# booked") learns that a run ended here, after the runtime's commit, without importing it.
RunFinishedListener = Callable[[dict[str, Any]], None]
_run_listeners: list[RunFinishedListener] = []


def on_run_finished(listener: RunFinishedListener) -> None:
    """Call ``listener`` with {run_id, subject_id, status, outcome, reply} after each run ends."""
    if listener not in _run_listeners:
        _run_listeners.append(listener)


def run_finished_announce(finished: dict[str, Any]) -> None:
    """The runtime's side: called after the commit that ended a run."""
    for listener in _run_listeners:
        listener(finished)
