"""Checking in to a booking from My bookings."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from accounts.http import AuthedRequest, htmx_swap
from bookings.checkin import booking_check_in
from bookings.errors import BookingError

_STATUS = {"invalid_input": 400, "not_found": 404}


@require_POST
@login_required
def check_in(request: AuthedRequest, code: str) -> HttpResponse:
    try:
        booking = booking_check_in(user=request.user, booking_code=code)
    except BookingError as error:
        if htmx_swap(request):
            return render(request, "bookings/_checkin.html", {"error": error, "code": code})
        status = _STATUS.get(error.reason, 409)
        return render(request, "bookings/problem.html", {"error": error}, status=status)
    if htmx_swap(request):
        return render(request, "bookings/_checkin.html", {"booking": booking})
    messages.success(request, gettext("Checked in to %(code)s.") % {"code": booking.code})
    return redirect("bookings:mine")
