"""Admins' drills screen: press a button, the worker rehearses the seed's trajectories in the
sandbox, the page polls the result (htmx) until the drill run has finished."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from accounts.http import AuthedRequest
from agentops.selectors import drill_get, drill_latest
from agentops.services import drill_start
from console.ops.views import admin_required


@require_GET
@admin_required
def drills(request: AuthedRequest) -> HttpResponse:
    return render(request, "console/drills.html", {"drill": drill_latest()})


@require_POST
@admin_required
def drill_start_view(request: AuthedRequest) -> HttpResponse:
    drill = drill_start(user=request.user)
    if request.htmx:
        return render(request, "console/drills.html#drill", {"drill": drill})
    return redirect("ops:drills")


@require_GET
@admin_required
@vary_on_headers("HX-Request")
def drill_detail(request: AuthedRequest, drill_id: str) -> HttpResponse:
    drill = drill_get(drill_id=drill_id)
    if drill is None:
        raise Http404(gettext("There is no such drill run."))
    template = "console/drills.html#drill" if request.htmx else "console/drills.html"
    return render(request, template, {"drill": drill})
