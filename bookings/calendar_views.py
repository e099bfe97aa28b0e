"""Calendars: the person's feed (a secret URL, no sign-in: calendar apps cannot sign in), one
booking's .ics, and the feed section of My bookings (show, copy, create or reset the link)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from accounts.http import AuthedRequest, htmx_swap
from bookings.calendar import (
    calendar_booking,
    calendar_feed,
    calendar_feed_user,
    calendar_token_reset,
)
from bookings.errors import BookingError
from bookings.models import CalendarToken
from bookings.selectors import booking_get

ICS = "text/calendar; charset=utf-8"
PAGE = "bookings/calendar.html"


def _ics(body: bytes, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=ICS)
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    response["Cache-Control"] = "private, no-store"
    return response


@require_GET
def feed(request: AuthedRequest, token: str) -> HttpResponse:
    """The feed of whoever this secret belongs to; an unknown or reset secret is 404."""
    user = calendar_feed_user(token=token)
    if user is None:
        raise Http404
    return _ics(calendar_feed(user=user, name=gettext("Room bookings")), "bookings.ics")


@require_GET
@login_required
def booking_ics(request: AuthedRequest, code: str) -> HttpResponse:
    try:
        booking = booking_get(user=request.user, code=code)
    except BookingError as error:
        raise Http404 from error
    return _ics(calendar_booking(booking=booking, name=gettext("Room bookings")), f"{code}.ics")


@require_GET
@login_required
@vary_on_headers("HX-Request")
def settings_section(request: AuthedRequest) -> HttpResponse:
    return _section(request)


@require_POST
@login_required
def reset(request: AuthedRequest) -> HttpResponse:
    """Make (or make anew) the person's feed link: the old one stops working."""
    calendar_token_reset(user=request.user)
    if htmx_swap(request):
        return _section(request)
    return redirect("bookings:calendar")


def _section(request: AuthedRequest) -> HttpResponse:
    token = CalendarToken.objects.filter(user=request.user).first()
    url = request.build_absolute_uri(reverse("bookings:feed", args=[token.token])) if token else ""
    template = f"{PAGE}#section" if htmx_swap(request) else PAGE
    return render(request, template, {"feed_url": url})
