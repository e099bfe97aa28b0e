"""The operators' reconciliation queue. Operators and admins only; others get a 403."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from accounts.http import AuthedRequest
from accounts.models import AuditAction
from accounts.selectors import audit_entries_latest
from agentops.selectors import may_reconcile
from agentops.services import DecisionResult, action_reconcile_decide, rollback_retry_decide
from console.operators.sections import SECTIONS, queue_count


def _forbidden(request: AuthedRequest) -> HttpResponse:
    context = {"message": gettext("Only operators and admins can see the reconciliation queue.")}
    return render(request, "console/operators/forbidden.html", context, status=403)


RESOLVED = (
    AuditAction.RECONCILE_ACCEPTED,
    AuditAction.RECONCILE_RETRIED,
    AuditAction.RECONCILE_ABANDONED,
    AuditAction.ROLLBACK_RESOLVED,
)


def _queue_context() -> dict:
    return {
        "sections": [(section, section.items()) for section in SECTIONS],
        "resolved": audit_entries_latest(actions=RESOLVED, limit=5),
    }


@require_GET
@login_required
def nav_counts(request: AuthedRequest) -> HttpResponse:
    """The navigation's counts as out-of-band fragments (every page re-reads them when its
    live socket says a count changed); the context processors compute what the reader may see."""
    return render(request, "console/_nav_counts.html")


@require_GET
@login_required
@vary_on_headers("HX-Request")
def queue(request: AuthedRequest) -> HttpResponse:
    if not may_reconcile(user=request.user):
        return _forbidden(request)
    swap = bool(request.htmx) and not request.htmx.history_restore_request
    template = "console/operators/queue.html"
    return render(request, f"{template}#sections" if swap else template, _queue_context())


@require_POST
@login_required
def decide(request: AuthedRequest, action_id: str) -> HttpResponse:
    if not may_reconcile(user=request.user):
        return _forbidden(request)
    result = action_reconcile_decide(
        action_id=action_id, operator=request.user, decision=request.POST.get("decision", "")
    )
    return _decided(request, result)


@require_POST
@login_required
def rollback_retry(request: AuthedRequest, run_id: str) -> HttpResponse:
    if not may_reconcile(user=request.user):
        return _forbidden(request)
    return _decided(request, rollback_retry_decide(run_id=run_id, operator=request.user))


def _decided(request: AuthedRequest, result: DecisionResult) -> HttpResponse:
    if request.htmx:  # the list again, with the outcome above it
        context = _queue_context() | {"result": result, "waiting": queue_count()}
        return render(request, "console/operators/queue.html#sections", context)
    (messages.success if result.ok else messages.error)(request, result.message)
    return redirect("operators:queue")
