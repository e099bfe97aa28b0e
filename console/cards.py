"""The run card: how a run's trace reads on a screen. One server-rendered fragment per event,
the same on the run's page and pushed over its websocket (agentops.live), so a page that
reconnects and a page that reloads show the same thing.

Labels are translated here (gettext_lazy), texts of the trace (tool messages, the reply) are
shown as they were recorded."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from typing import Any

from django.template.loader import render_to_string
from django.utils.translation import gettext_lazy as _
from django.utils.translation import override

from agentops.selectors import EventKind, RunStatus
from approvals.models import RequestStatus

CARD_TEMPLATE = "console/_run_card.html"

STATUS_LABELS = {
    RunStatus.RUNNING: _("working"),
    RunStatus.WAITING_APPROVAL: _("waiting for an approver"),
    RunStatus.RECONCILING: _("checking an unknown outcome"),
    RunStatus.COMPENSATING: _("releasing what it booked"),
    RunStatus.ROLLBACK_PENDING: _("a release failed; an operator finishes it"),
    RunStatus.SUCCEEDED: _("done"),
    RunStatus.FAILED: _("not done"),
    RunStatus.CANCELLED: _("cancelled"),
}

DECISION_LABELS = {
    "execute": _("allowed"),
    "approval": _("needs an approver"),
    "refuse": _("refused"),
    "abort": _("stopped the run"),
}

CHECK_LABELS = {
    "rate_limit": _("rate limit"),
    "unknown_tool": _("unknown tool"),
    "schema": _("arguments"),
    "visibility": _("role"),
    "scope": _("what the request allowed"),
    "budget": _("budget"),
    "loop": _("repeated call"),
    "policy": _("policy"),
}

# What a call does, in a person's words: the card names no tool (admins read the tool names on
# the run's page in the operators' screens). A tool not listed here (a gateway's) is "a step".
TOOL_LABELS = {
    "find_available_rooms": _("looking for free rooms"),
    "reserve_room": _("booking the room"),
    "cancel_booking": _("cancelling the booking"),
    "change_booking": _("changing the booking"),
    "get_booking": _("looking up the booking"),
    "list_my_bookings": _("reading your bookings"),
    "reserve_series": _("booking the series"),
    "cancel_series": _("cancelling the series"),
}
OTHER_TOOL = _("a step")

LOOKUP_LABELS = {
    "found": _("it was done"),
    "absent": _("nothing was written"),
    "unknown": _("still unclear"),
}

# The run's status after an event of this kind (run_finished carries its own).
_STATUS_AFTER = {
    EventKind.RUN_STARTED: RunStatus.RUNNING,
    EventKind.RUN_WAITING_APPROVAL: RunStatus.WAITING_APPROVAL,
    EventKind.RUN_RECONCILING: RunStatus.RECONCILING,
    EventKind.RUN_RESUMED: RunStatus.RUNNING,
    EventKind.RUN_COMPENSATING: RunStatus.COMPENSATING,
    EventKind.RUN_ROLLBACK_PENDING: RunStatus.ROLLBACK_PENDING,
}


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _label(labels: dict[str, Any], value: Any) -> Any:
    """The label of a recorded value (a payload's, so of any JSON type), else the value."""
    return labels.get(value, value)


def tool_label(tool: Any) -> Any:
    return TOOL_LABELS.get(tool, OTHER_TOOL) if isinstance(tool, str) else OTHER_TOOL


def _proposal_view(proposal: Any) -> dict[str, Any]:
    proposal = _dict(proposal)
    arguments = _dict(proposal.get("arguments"))
    room, booking = arguments.get("room_id"), arguments.get("booking_id")
    return {
        "label": tool_label(proposal.get("tool")),
        "room": room if isinstance(room, str) else "",
        "booking": booking if isinstance(booking, str) else "",
    }


def status_view(status: str) -> dict[str, Any]:
    return {"code": status, "label": STATUS_LABELS.get(RunStatus(status), status)}


def event_view(event: dict[str, Any]) -> dict[str, Any]:
    """One trace event (``trace.event_json``) as the card template reads it."""
    payload = _dict(event.get("payload"))
    view: dict[str, Any] = {
        "seq": event["seq"],
        "kind": event["kind"],
        "at": _when(event.get("at")),
        "p": payload,
    }
    kind = event["kind"]
    view["label"] = tool_label(payload.get("tool"))
    if kind == EventKind.RUN_STARTED:
        understood = _dict(payload.get("understood"))
        view["understood"] = understood
        view["start"], view["end"] = (
            _when(understood.get("start_at")),
            _when(understood.get("end_at")),
        )
    elif kind == EventKind.MODEL_STEP:
        proposals = payload.get("proposals")
        view["proposals"] = (
            [_proposal_view(p) for p in proposals] if isinstance(proposals, list) else []
        )
    elif kind == EventKind.GATE:
        view["decision"] = _label(DECISION_LABELS, payload.get("decision"))
        view["check"] = _label(CHECK_LABELS, payload.get("check"))
        view["refusal"] = _dict(payload.get("refusal"))
    elif kind == EventKind.PRECHECK_REFUSED:
        view["refusal"] = _dict(payload.get("refusal"))
    elif kind == EventKind.EXECUTION_FINISHED:
        result = _dict(payload.get("result"))
        data = _dict(result.get("data"))
        view["result"] = result
        view["rooms"] = data.get("rooms") if isinstance(data.get("rooms"), list) else None
        view["receipt"] = _receipt(data)
    elif kind == EventKind.RECONCILE_LOOKUP:
        view["receipt"] = _receipt(_dict(payload.get("receipt")))
        view["lookup"] = _label(LOOKUP_LABELS, payload.get("status"))
    elif kind == EventKind.APPROVAL_DECIDED:
        decided = payload.get("status")
        view["decided"] = (
            RequestStatus(decided).label if decided in RequestStatus.values else decided
        )
    elif kind == EventKind.APPROVAL_REQUESTED:
        view["deadline"] = _when(payload.get("deadline"))
    status = payload.get("status") if kind == EventKind.RUN_FINISHED else _STATUS_AFTER.get(kind)
    view["status"] = status_view(status) if status in RunStatus.values else None
    return view


def _receipt(data: dict[str, Any]) -> dict[str, Any] | None:
    """A write's receipt: what it made (a booking code), where and when."""
    if not data.get("booking_id"):
        return None
    return data | {"start": _when(data.get("start_at")), "end": _when(data.get("end_at"))}


# Every page watching a run gets the same fragment of an event (events never change): one
# render per event and language per process, not one per watcher (bench/trace_latency.py).
_FRAGMENTS: OrderedDict[tuple[str, int, str], str] = OrderedDict()
_FRAGMENTS_KEPT = 2048


def event_fragment(event: dict[str, Any], *, run_id: str, language: str) -> str:
    """The out-of-band swaps that add one event to an open card (htmx ws extension)."""
    key = (run_id, event["seq"], language)
    fragment = _FRAGMENTS.get(key)
    if fragment is None:
        with override(language):
            fragment = render_to_string(
                f"{CARD_TEMPLATE}#push", {"e": event_view(event), "run_id": run_id}
            )
        _FRAGMENTS[key] = fragment
        if len(_FRAGMENTS) > _FRAGMENTS_KEPT:
            _FRAGMENTS.popitem(last=False)
    return fragment
