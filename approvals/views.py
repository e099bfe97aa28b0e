"""The approvers' inbox: pending high-risk actions with their exact intent, a decision with a
reason, and the history of decisions. Employees get a 403."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from accounts.http import AuthedRequest, htmx_swap
from accounts.models import Role
from accounts.selectors import user_roles
from approvals import selectors, services
from approvals.models import RequestStatus


def _forbidden(request: AuthedRequest) -> HttpResponse:
    context = {"message": gettext("Only approvers can see the approvals inbox.")}
    return render(request, "approvals/forbidden.html", context, status=403)


@require_GET
@login_required
@vary_on_headers("HX-Request")
def inbox(request: AuthedRequest) -> HttpResponse:
    if Role.APPROVER not in user_roles(user=request.user):
        return _forbidden(request)
    context: dict[str, Any] = {
        "pending": selectors.approval_cards(approver=request.user),
        "stale": selectors.approvals_stale(),
        "decided": selectors.approvals_decided_with_outcomes(limit=50),
    }
    swap = htmx_swap(request)
    return render(
        request, "approvals/inbox.html#pending" if swap else "approvals/inbox.html", context
    )


@require_GET
@login_required
def detail(request: AuthedRequest, request_id: str) -> HttpResponse:
    """One request: what it asks in words, what a re-check against now finds (or what became of
    it), and its whole history. For approvers and the requester; others get a 404."""
    found = selectors.approval_detail(request_id=request_id, viewer=request.user)
    if found is None:
        raise Http404
    may_decide = (
        found.request.status == RequestStatus.PENDING
        and found.request.requester_id != request.user.pk
        and Role.APPROVER in user_roles(user=request.user)
    )
    context = {"detail": found, "item": found, "may_decide": may_decide}
    return render(request, "approvals/detail.html", context)


@require_POST
@login_required
def refresh(request: AuthedRequest, request_id: str) -> HttpResponse:
    """Ask for a fresh approval of a frozen action's exact intent."""
    result = services.approval_refresh(request_id=request_id, approver=request.user)
    if result.ok:
        messages.success(request, gettext("A fresh approval was requested."))
    else:
        messages.error(request, result.message)
    return redirect("approvals:inbox")


@require_POST
@login_required
def decide(request: AuthedRequest, request_id: str) -> HttpResponse:
    decision = request.POST.get("decision")
    if decision not in ("approve", "reject"):
        result = services.Result(False, "bad_decision", gettext("Choose approve or reject."))
    else:
        result = services.approval_decide(
            request_id=request_id,
            approver=request.user,
            approve=decision == "approve",
            reason=request.POST.get("reason", ""),
        )
    if request.htmx:
        pending = selectors.approval_request_pending(request_id=request_id)
        if not result.ok and pending is not None:  # the same card again, with what went wrong
            context = {"item": selectors.approval_card(request=pending), "error": result.message}
            return render(request, "approvals/inbox.html#card", context)
        context = {"request_id": request_id, "result": result, "decision": decision}
        response = render(request, "approvals/inbox.html#outcome", context)
        response["HX-Trigger"] = "inbox-changed"  # the list re-reads: the card moves to Decided
        return response
    if result.ok:
        messages.success(request, gettext("Decision recorded."))
    else:
        messages.error(request, result.message)
    return redirect("approvals:inbox")
