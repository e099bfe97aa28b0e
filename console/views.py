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
            request_text=text,
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
    context: dict[str, Any] = {
        "form": AssistantForm(initial={"request": text, "conversation": conversation or None}),
        "thread": (
            [(turn, status_view(turn.status)) for turn in run_conversation_before(run=run)]
            if run is not None and run.subject_id == request.user.pk
            else []
        ),
        "error": error,
        "runs": [
            (past, status_view(past.status))
            for past in run_list_for_user(user=request.user, limit=PAST_RUNS)
        ],
        "card": card_context(run, language=get_language()) if run is not None else None,
    }
    return render(request, "console/assistant.html", context, status=status)


def card_context(run: AgentRun, *, language: str) -> dict[str, Any]:
    """What the card shows of a run now; the socket sends what follows the last event."""
    events = [event_view(e) for e in run_events_after(run_id=run.pk, after=0)]
    return {
        "run": run,
        "events": events,
        "last_seq": events[-1]["seq"] if events else 0,
        "status": status_view(run.status),
        "live": not run.is_terminal,
        "language": language,
    }
