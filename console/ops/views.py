"""Admins' screens over the runtime's records: the audit log (filters, pages, exports) and the
story of one run. Employees get a 403 on the log; a run's subject may read their own run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.core.handlers.asgi import ASGIRequest
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from accounts.http import AuthedRequest, htmx_swap, role_required
from accounts.models import Role
from accounts.selectors import user_roles
from agentops.selectors import (
    ExportFormat,
    audit_details,
    audit_export_chunks,
    audit_row,
    audit_rows,
    run_story,
)
from agentops.services import audit_export_record
from console.ops.forms import AuditFilterForm, ExportForm

PAGE_SIZE = 50
_CONTENT_TYPES = {
    ExportFormat.CSV: "text/csv; charset=utf-8",
    ExportFormat.JSONL: "application/x-ndjson; charset=utf-8",
}


admin_required = role_required(
    Role.ADMIN,
    template="console/forbidden.html",
    message=gettext_lazy("Only admins can see this page."),
)


@require_GET
@admin_required
@vary_on_headers("HX-Request")
def audit_log(request: AuthedRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    filters = form.filters()
    page = Paginator(audit_rows(filters=filters), PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [audit_row(values) for values in page.object_list]
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": form, "page": page, "rows": rows, "details": audit_details(rows=rows)}
    context |= {"query": query.urlencode(), "export_form": ExportForm(request.GET)}
    template = "console/audit_log.html#results" if htmx_swap(request) else "console/audit_log.html"
    return render(request, template, context)


@require_POST
@admin_required
def audit_export(request: AuthedRequest) -> StreamingHttpResponse:
    form = ExportForm(request.POST)
    filters, (export_format, personal_data) = form.filters(), form.options()
    audit_export_record(
        actor=request.user,
        export_format=export_format,
        personal_data=personal_data,
        filters=filters,
    )
    chunks = audit_export_chunks(
        filters=filters, personal_data=personal_data, export_format=export_format
    )
    # Under ASGI a sync iterator would be read whole before sending.
    body = _async_chunks(chunks) if isinstance(request, ASGIRequest) else chunks
    response = StreamingHttpResponse(body, content_type=_CONTENT_TYPES[export_format])
    name = f"audit-{timezone.localtime():%Y%m%d-%H%M%S}.{export_format.value}"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


async def _async_chunks(chunks: Iterator[str]) -> AsyncIterator[str]:
    """Each piece read on one thread of the request's own (its database connection and cursor),
    where the handler closes the response too (config.handler)."""

    def piece_or_none() -> str | None:
        return next(chunks, None)

    read = sync_to_async(piece_or_none, thread_sensitive=True)
    while (piece := await read()) is not None:
        yield piece


@require_GET
@login_required
def run_detail(request: AuthedRequest, run_id: str) -> HttpResponse:
    story = run_story(run_id=run_id, viewer=request.user)
    if story is None:
        raise Http404(gettext("There is no such run of yours."))
    is_admin = Role.ADMIN in user_roles(user=request.user)
    return render(request, "console/run_detail.html", {"story": story, "is_admin": is_admin})
