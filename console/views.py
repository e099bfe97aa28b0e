"""The assistant's screens: a request box, the run card that fills live over the run's
websocket, and the user's past runs. Runs start through `run_start`, as from POST /api/runs."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import get_language, gettext
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from accounts.http import AuthedRequest
from agentops.selectors import (
    TERMINAL_RUN_STATUSES,
    AgentRun,
    run_conversation_before,
    run_events_after,
    run_get_for_viewer,
    run_list_for_user,
)
from agentops.services import (
    LimiterUnavailableError,
    RunKeyReused,
    RunRateLimited,
    RunRequestError,
    run_start,
)
from console.cards import event_view, status_view
from console.forms import AssistantForm

PAST_RUNS = 20


@require_GET
@login_required
@vary_on_headers("HX-Request")
def assistant(request: AuthedRequest) -> HttpResponse:
    return _page(request, run=None)


@require_POST
@login_required
def start(request: AuthedRequest) -> HttpResponse:
    form, text = AssistantForm(request.POST), request.POST.get("request", "")
    if not form.is_valid():
        error = gettext("Write your request in at most 2000 characters.")
        return _page(request, run=None, text=text, error=error, status=400)
    try:
        run = run_start(
            user=request.user,
            request_text=form.cleaned_data["request"],
            idempotency_key=str(form.cleaned_data["key"]),
            conversation_id=form.cleaned_data["conversation"],
        )
    except RunKeyReused:
        error = gettext("This form was already sent with another request; send it again.")
        return _page(request, run=None, text=text, error=error, status=409)
    except RunRateLimited as exc:  # worded in the request's language, with the wait
        return _page(request, run=None, text=text, error=exc.reply, status=429)
    except LimiterUnavailableError:
        error = gettext("The assistant is busy right now; try again in a moment.")
        return _page(request, run=None, text=text, error=error, status=503)
    except RunRequestError:
        error = gettext("Write your request in at most 2000 characters.")
        return _page(request, run=None, text=text, error=error, status=400)
    return redirect("assistant:run", run_id=run.pk)  # a second submit lands on the same run


@require_GET
@login_required
@vary_on_headers("HX-Request")
def run_page(request: AuthedRequest, run_id: uuid.UUID) -> HttpResponse:
    run = run_get_for_viewer(run_id=run_id, user=request.user)
    if run is None:
        raise Http404
    return _page(request, run=run)


def _page(
    request: AuthedRequest,
    *,
    run: AgentRun | None,
    text: str = "",
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    """The page; a refused request comes back in a fresh form (a new one-time key). On a
    run's page the form continues its conversation, below the earlier turns and the card."""
    conversation = run.conversation_id if run is not None else request.POST.get("conversation")
    card = card_context(run, language=get_language()) if run is not None else None
    context: dict[str, Any] = {
        "form": AssistantForm(initial={"request": text, "conversation": conversation or None}),
        "thread": (
            [(turn, status_view(turn.status)) for turn in run_conversation_before(run=run)]
            if run is not None and run.subject_id == request.user.pk
            else []
        ),
        "error": error,
        "card": card,
        # The card's run as the card shows it (the socket's pushes update both together).
        "runs": [
            (
                past,
                card["status"] if card and past.pk == card["run"].pk else status_view(past.status),
            )
            for past in run_list_for_user(user=request.user, limit=PAST_RUNS)
        ],
    }
    return render(request, "console/assistant.html", context, status=status)


def card_context(run: AgentRun, *, language: str) -> dict[str, Any]:
    """What the card shows of a run now; the socket sends what follows the last event. Its
    status is the one its events leave, not the run row's: the row was read before them, and
    an event committed in between (the run waits for an approver) would show on the card while
    its status stayed behind, with no later event to set it right."""
    events = [event_view(e) for e in run_events_after(run_id=run.pk, after=0)]
    status = next((e["status"] for e in reversed(events) if e["status"]), None)
    if status is None:
        status = status_view(run.status)
    return {
        "run": run,
        "events": events,
        "last_seq": events[-1]["seq"] if events else 0,
        "status": status,
        "live": status["code"] not in TERMINAL_RUN_STATUSES,
        "language": language,
    }
