"""Employee screens: find and book a room, list and cancel my bookings.

htmx requests get the swapped region only, always with status 200 so htmx swaps refusals too.
Plain form posts get a redirect with a message on success, or a full page with the status that
matches the refusal (400, 403, 404, 409).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, timedelta

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
from agentops.contract import Reason
from approvals.selectors import approval_requests_of_with_outcomes
from approvals.services import approval_withdraw
from bookings import schedule
from bookings.errors import BookingError
from bookings.forms import BookForm, ChangeForm, ChangePick, DayForm, SearchForm
from bookings.models import Booking
from bookings.selectors import (
    booking_get,
    booking_list_for_user,
    booking_list_overlapping,
    room_get,
    room_search,
)
from bookings.services import (
    Reservation,
    booking_cancel_request,
    booking_change_request,
    booking_request,
)

MINE_LIMIT = 50
_STATUS = {"invalid_input": 400, "forbidden": 403, "not_found": 404}  # anything else: 409


@require_GET
@login_required
@vary_on_headers("HX-Request")
def search(request: AuthedRequest) -> HttpResponse:
    form = SearchForm(request.GET or None)
    query, rows, error, held = None, [], None, []
    if form.is_bound:
        try:
            query = form.parse()
            # A fresh idempotency key per Book button: a double submit books once.
            dept = request.user.department
            rows = [
                (found, uuid.uuid4(), schedule.room_approval(room=found.room, user_department=dept))
                for found in room_search(**query, user=request.user)
            ]
            held = booking_list_overlapping(
                user=request.user, start_at=query["start_at"], end_at=query["end_at"]
            )
        except BookingError as exc:
            query, error = None, exc
    context = {"form": form, "query": query, "rows": rows, "error": error, "held": held}
    template = "bookings/search.html#results" if htmx_swap(request) else "bookings/search.html"
    return render(request, template, context)


@require_POST
@login_required
def book(request: AuthedRequest) -> HttpResponse:
    """A booking made on the screen goes through the runtime like the assistant's: the same
    gate, policy (a premium room waits for an approver), idempotency and audit."""
    asked: dict = {}
    try:
        asked = BookForm(request.POST).parse()
        outcome = booking_request(user=request.user, **asked)
    except BookingError as error:
        context = {"error": error} | _alternatives(request, error, asked)
        return _refused(request, "bookings/search.html#outcome", context)
    if htmx_swap(request):
        return render(request, "bookings/search.html#outcome", {outcome.kind: outcome.value})
    if isinstance(outcome.value, Reservation):
        messages.success(
            request, gettext("Booked %(booking)s.") % {"booking": _summary(outcome.value.booking)}
        )
    else:  # "pending": the runtime's details of the approval it waits for
        messages.info(request, gettext("Requested; it waits for an approver."))
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
    """Through the runtime, as every channel cancels: an Action, trace, audit and verification."""
    key = request.POST.get("idempotency_key") or uuid.uuid4().hex
    try:
        done = booking_cancel_request(
            user=request.user, booking_code=code, idempotency_key=key[:64]
        )
    except BookingError as error:
        return _refused(request, "bookings/mine.html#row", {"code": code, "error": error})
    if htmx_swap(request):
        context = {"booking": done.booking, "pending": done.pending}
        return render(request, "bookings/mine.html#row", context)
    if done.kind == "pending":
        messages.info(request, gettext("Cancellation requested; it waits for an approver."))
    else:
        messages.success(
            request, gettext("Cancelled %(booking)s.") % {"booking": _summary(done.booking)}
        )
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


@require_GET
@login_required
@vary_on_headers("HX-Request")
def day(request: AuthedRequest) -> HttpResponse:
    """Rooms by the hours of a day, with the person's own bookings and the others' as busy."""
    form = DayForm(request.GET or None, floors=schedule.room_floors(user=request.user))
    try:
        when, filters = (
            form.parse() if form.is_bound else (timezone.localdate(), schedule.Filters())
        )
        rows = schedule.schedule_day(user=request.user, day=when, filters=filters)
        error = None
    except BookingError as exc:
        when, filters, rows, error = timezone.localdate(), schedule.Filters(), [], exc
    context = _grid_context(request, form=form, day=when, rows=rows, error=error, filters=filters)
    context |= {"mode": "day", "topic": f"day={when.isoformat()}"}
    return render(request, _grid_template(request), context)


@require_GET
@login_required
@vary_on_headers("HX-Request")
def room_week(request: AuthedRequest, code: str) -> HttpResponse:
    """One room's week from the chosen day."""
    room = room_get(code=code, user=request.user)
    if room is None:
        error = BookingError(
            "not_found", "room_not_found", "There is no room %(room)s.", params={"room": code}
        )
        return render(request, "bookings/problem.html", {"error": error}, status=404)
    form = DayForm(request.GET or None, floors=schedule.room_floors(user=request.user))
    try:
        when, filters = (
            form.parse() if form.is_bound else (timezone.localdate(), schedule.Filters())
        )
    except BookingError:
        when, filters = timezone.localdate(), schedule.Filters()
    rows = schedule.schedule_room_week(user=request.user, room=room, first=when)
    context = _grid_context(request, form=form, day=when, rows=rows, error=None, filters=filters)
    context |= {
        "mode": "week",
        "room": room,
        "topic": f"room={room.code}",
        # Said once above the week, not on every day's row.
        "room_approval": schedule.room_approval(room=room, user_department=request.user.department),
    }
    return render(request, _grid_template(request), context)


@require_GET
@login_required
def day_slot(request: AuthedRequest) -> HttpResponse:
    """The booking form of a free span the person picked on the grid."""
    try:
        slot = schedule.slot_choice(
            user=request.user,
            room_code=request.GET.get("room", ""),
            start=request.GET.get("start", ""),
            attendees=request.GET.get("attendees", "1"),
            equipment=request.GET.getlist("equipment"),
        )
    except BookingError as error:
        return render(request, "bookings/day.html#panel", {"error": error})
    return render(request, "bookings/day.html#panel", {"slot": slot, "key": uuid.uuid4()})


@require_POST
@login_required
def day_book(request: AuthedRequest) -> HttpResponse:
    """Book the picked span: the same governed booking as the search's Book button."""
    asked: dict = {}
    try:
        asked = BookForm(request.POST).parse()
        outcome = booking_request(user=request.user, **asked)
    except BookingError as error:
        context = {"error": error, "in_day": True} | _alternatives(request, error, asked)
        return _refused(request, "bookings/day.html#outcome", context)
    response = render(request, "bookings/day.html#outcome", {outcome.kind: outcome.value})
    response["HX-Trigger"] = "schedule-changed"
    return response


@require_GET
@login_required
def change_form(request: AuthedRequest, code: str) -> HttpResponse:
    try:
        booking = booking_get(user=request.user, code=code)
    except BookingError as error:
        return render(request, "bookings/problem.html", {"error": error}, status=404)
    initial = schedule.change_initial(booking) | {"idempotency_key": uuid.uuid4()}
    picked = ChangePick(request.GET or None)
    chosen = picked.is_valid()  # a free time chosen under "Free instead"; else it is ignored
    if chosen:
        initial |= picked.cleaned_data
    form = ChangeForm(initial=initial)
    context = {
        "booking": booking,
        "form": form,
        "rooms": schedule.rooms_for(user=request.user),
        "picked": chosen,
    }
    return render(request, "bookings/change.html", context)


@require_POST
@login_required
def change(request: AuthedRequest, code: str) -> HttpResponse:
    """One governed write (change_booking): the booking keeps its code and its slot until the
    change is made or refused."""
    asked: dict = {}
    try:
        asked = ChangeForm(request.POST).parse()
        done = booking_change_request(user=request.user, booking_code=code, **asked)
    except BookingError as error:
        # "Free instead" fills this page's form again: the booking is moved, never a new one made.
        context = {"error": error, "code": code, "move": code} | _alternatives(
            request, error, asked
        )
        if _key_spent(error):
            context["idempotency_key"] = uuid.uuid4()
        return _refused(request, "bookings/change.html#outcome", context)
    if htmx_swap(request):
        # The page stays: its "Now:" line shows the booking as changed, and the next change is
        # a new write with a key of its own (the one just used would replay this one).
        context = {"done": done, "idempotency_key": uuid.uuid4()}
        return render(request, "bookings/change.html#outcome", context)
    if done.kind == "pending":
        messages.info(
            request,
            gettext(
                "Change requested; it waits for an approver. Your booking stays as it is until then."
            ),
        )
    else:
        messages.success(
            request, gettext("Changed %(booking)s.") % {"booking": _summary(done.booking)}
        )
    return redirect("bookings:mine")


# A refusal wrote nothing under its key, so the next try is a new request that needs a key of
# its own: the same key with other fields would be refused as reused. Only a request that may
# still be under way keeps its key (a double submit is then answered by the first one).
_KEY_STILL_IN_USE = frozenset({Reason.IN_PROGRESS, Reason.UNKNOWN_OUTCOME})


def _key_spent(error: BookingError) -> bool:
    return error.reason not in _KEY_STILL_IN_USE


def _grid_template(request: AuthedRequest) -> str:
    return "bookings/day.html#grid" if htmx_swap(request) else "bookings/day.html"


def _grid_context(request: AuthedRequest, *, day: date, **context: object) -> dict[str, object]:
    return context | {
        "day": day,
        "hours": schedule.hours(day),
        "prev_day": day - timedelta(days=1),
        "next_day": day + timedelta(days=1),
        "query": request.GET.urlencode(),
    }


def _alternatives(request: AuthedRequest, error: BookingError, asked: dict) -> dict:
    """Free times instead of a slot someone else just took (nothing for other refusals)."""
    if error.code not in {"slot_taken", "stale_version"} or not asked:
        return {}
    found = schedule.free_alternatives(
        user=request.user,
        room_code=asked["room_code"],
        start_at=asked["start_at"],
        end_at=asked["end_at"],
        attendees=asked["attendees"],
    )
    return {
        "alternatives": found,
        "room_code": asked["room_code"],
        "wanted_start": asked["start_at"],
        "wanted_end": asked["end_at"],
        "attendees": asked["attendees"],
        "title": asked.get("title", ""),
    }


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
