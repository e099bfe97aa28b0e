"""Employee screens: find and book a room, list and cancel my bookings.

htmx requests get the swapped region only, always with status 200 so htmx swaps refusals too.
Plain form posts get a redirect with a message on success, or a full page with the status that
matches the refusal (400, 403, 404, 409).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from accounts.http import AuthedRequest, htmx_swap
from approvals.selectors import approval_requests_of_with_outcomes
from approvals.services import approval_withdraw
from bookings.errors import BookingError
from bookings.forms import BookForm, SearchForm
from bookings.models import Booking
from bookings.selectors import booking_list_for_user, room_search
from bookings.services import booking_cancel, booking_request

MINE_LIMIT = 50
_STATUS = {"invalid_input": 400, "forbidden": 403, "not_found": 404}  # anything else: 409


@require_GET
@login_required
@vary_on_headers("HX-Request")
def search(request: AuthedRequest) -> HttpResponse:
    form = SearchForm(request.GET or None)
    query, rows, error = None, [], None
    if form.is_bound:
        try:
            query = form.parse()
            # A fresh idempotency key per Book button: a double submit books once.
            rows = [(found, uuid.uuid4()) for found in room_search(**query)]
        except BookingError as exc:
            query, error = None, exc
    context = {"form": form, "query": query, "rows": rows, "error": error}
    template = "bookings/search.html#results" if htmx_swap(request) else "bookings/search.html"
    return render(request, template, context)


@require_POST
@login_required
def book(request: AuthedRequest) -> HttpResponse:
    """A booking made on the screen goes through the runtime like the assistant's: the same
    gate, policy (a premium room waits for an approver), idempotency and audit."""
    try:
        outcome = booking_request(user=request.user, **BookForm(request.POST).parse())
    except BookingError as error:
        return _refused(request, "bookings/search.html#outcome", {"error": error})
    if htmx_swap(request):
        return render(request, "bookings/search.html#outcome", {outcome.kind: outcome.value})
    if outcome.kind == "pending":
        messages.info(request, gettext("Requested; it waits for an approver."))
    else:
        messages.success(
            request, gettext("Booked %(booking)s.") % {"booking": _summary(outcome.value.booking)}
        )
    return redirect("bookings:mine")


@require_GET
@login_required
def mine(request: AuthedRequest) -> HttpResponse:
    page = booking_list_for_user(user=request.user, limit=MINE_LIMIT)
    bookings = _upcoming_first(page.items, now=timezone.now())
    requests = approval_requests_of_with_outcomes(requester=request.user, limit=MINE_LIMIT)
    context = {"bookings": bookings, "page": page, "requests": requests}
    return render(request, "bookings/mine.html", context)


@require_POST
@login_required
def cancel(request: AuthedRequest, code: str) -> HttpResponse:
    try:
        booking = booking_cancel(user=request.user, booking_code=code)
    except BookingError as error:
        return _refused(request, "bookings/mine.html#row", {"code": code, "error": error})
    if htmx_swap(request):
        return render(request, "bookings/mine.html#row", {"booking": booking})
    messages.success(request, gettext("Cancelled %(booking)s.") % {"booking": _summary(booking)})
    return redirect("bookings:mine")


@require_POST
@login_required
def withdraw(request: AuthedRequest, request_id: str) -> HttpResponse:
    """The requester takes back a request still waiting for an approver."""
    result = approval_withdraw(request_id=request_id, user=request.user)
    if result.ok:
        messages.success(request, gettext("Request withdrawn; nothing was booked."))
    else:
        messages.error(request, gettext("This request can no longer be withdrawn."))
    return redirect("bookings:mine")


def _refused(request: AuthedRequest, partial: str, context: dict) -> HttpResponse:
    if htmx_swap(request):
        return render(request, partial, context)
    status = _STATUS.get(context["error"].reason, 409)
    return render(request, "bookings/problem.html", context, status=status)


def _summary(booking: Booking) -> str:
    start, end = timezone.localtime(booking.start_at), timezone.localtime(booking.end_at)
    return gettext("%(room)s, %(start)s–%(end)s, code %(code)s") % {
        "room": booking.room.code,
        "start": date_format(start, "SHORT_DATETIME_FORMAT"),
        "end": date_format(end, "TIME_FORMAT"),
        "code": booking.code,
    }


def _upcoming_first(bookings: list[Booking], *, now: datetime) -> list[Booking]:
    """Upcoming bookings soonest first, then past ones most recent first."""

    def key(booking: Booking) -> tuple[int, float]:
        start = booking.start_at.timestamp()
        return (0, start) if booking.end_at > now else (1, -start)

    return sorted(bookings, key=key)
