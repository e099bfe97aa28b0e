"""Recurring meetings: choose a rule, preview every occurrence with the taken ones, book all
or only the free ones (one governed write), and cancel from one occurrence on, or all.

htmx requests get the swapped region with status 200 (refusals included); plain form posts get
a full page with the refusal's status, as bookings.views does."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from accounts.http import AuthedRequest, htmx_swap
from bookings.errors import BookingError
from bookings.models import BookingSeries
from bookings.selectors import room_choices
from bookings.series import series_cancel_request, series_get, series_preview, series_request
from bookings.series_forms import SeriesBookForm, SeriesCancelForm, SeriesForm

PAGE = "bookings/series.html"
DETAIL = "bookings/series_detail.html"
_STATUS = {"invalid_input": 400, "forbidden": 403, "not_found": 404}


@require_GET
@login_required
@vary_on_headers("HX-Request")
def series_new(request: AuthedRequest) -> HttpResponse:
    """The form; with its fields filled (the Preview button), every occurrence below it."""
    form = SeriesForm(request.GET or None, rooms=room_choices(user=request.user))
    preview, error = None, None
    if form.is_bound:
        try:
            preview = series_preview(user=request.user, **form.parse())
        except BookingError as exc:
            error = exc
    context = {"form": form, "preview": preview, "error": error, "key": uuid.uuid4()}
    return render(request, f"{PAGE}#preview" if htmx_swap(request) else PAGE, context)


@require_POST
@login_required
def series_book(request: AuthedRequest) -> HttpResponse:
    try:
        outcome = series_request(user=request.user, **SeriesBookForm(request.POST).parse())
    except BookingError as error:
        return _answer(request, {"error": error}, status_of=error)
    return _answer(request, {outcome.kind: outcome.value})


@require_GET
@login_required
def series_detail(request: AuthedRequest, series_id: int) -> HttpResponse:
    try:
        series = series_get(user=request.user, series_id=series_id)
    except BookingError as error:
        return render(request, "bookings/problem.html", {"error": error}, status=404)
    return render(request, DETAIL, _meetings(series))


@require_POST
@login_required
def series_cancel(request: AuthedRequest, series_id: int) -> HttpResponse:
    try:
        outcome = series_cancel_request(
            user=request.user, series_id=series_id, **SeriesCancelForm(request.POST).parse()
        )
    except BookingError as error:
        return _answer(request, {"error": error}, status_of=error)
    if htmx_swap(request):  # the page stays: its meetings are swapped for how they are now
        series = series_get(user=request.user, series_id=series_id)
        context = _meetings(series) | {"cancelled": outcome.value}
        return render(request, f"{DETAIL}#cancelled", context)
    return _answer(request, {"cancelled": outcome.value})


def _meetings(series: BookingSeries) -> dict:
    return {
        "series": series,
        # A one-time key per button: a double submit cancels once.
        "rows": [(b, uuid.uuid4()) for b in series.bookings.order_by("during")],
        "now": timezone.now(),
        "key": uuid.uuid4(),
    }


def _answer(
    request: AuthedRequest, context: dict, *, status_of: BookingError | None = None
) -> HttpResponse:
    """The outcome fragment for htmx; a page of its own (with the refusal's status) otherwise."""
    if htmx_swap(request):
        return render(request, "bookings/_series_outcome.html", context)
    status = 200 if status_of is None else _STATUS.get(status_of.reason, 409)
    return render(request, "bookings/series_outcome.html", context, status=status)
