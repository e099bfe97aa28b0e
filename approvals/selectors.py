"""Approval reads."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection
from django.utils.translation import gettext_noop

from accounts.models import Role, User
from accounts.selectors import user_roles
from approvals import hooks
from approvals.models import (
    ApprovalAudit,
    ApprovalRecord,
    ApprovalRequest,
    AuditEvent,
    RequestStatus,
)
from config import sqlrows

# Hand-written: the runtime reads an action's latest request to settle every decision (a
# worker, once per decided request) and whenever an MCP client or the sweeper looks at a waiting
# call. The queryset (two select_related joins, an order, a limit) cost more to build than to
# run; this is its statement (tests/approvals/test_records.py holds it to the queryset).
_LATEST_SQL = """
SELECT {request}, {record}, {user}
  FROM approvals_approvalrequest q
  LEFT JOIN approvals_approvalrecord c ON c.request_id = q.id
  LEFT JOIN accounts_user u ON u.id = c.approver_id
 WHERE q.action_ref = %s
 ORDER BY q.created_at DESC
 LIMIT 1
"""


def approval_request_latest(*, action_ref: str) -> ApprovalRequest | None:
    """The action's latest request with its decision's record and approver loaded (as
    ``select_related("record", "record__approver")``: no record is known to be none)."""
    row = _one("latest", [action_ref])
    if row is None:
        return None
    request, record, approver = sqlrows.instances(row, ApprovalRequest, ApprovalRecord, User)
    if record.pk is not None:
        record.approver = approver
    _record_set(request, record)
    return request


# Hand-written for the same reason: a decision's e-mail to its requester (bookings.decisions,
# a worker, once per decided request) reads the request with its requester and its record.
_DECIDED_SQL = """
SELECT {request}, {user}, {record}
  FROM approvals_approvalrequest q
  JOIN accounts_user u ON u.id = q.requester_id
  LEFT JOIN approvals_approvalrecord c ON c.request_id = q.id
 WHERE q.id = %s
"""


def approval_request_with_record(*, request_id: Any) -> ApprovalRequest | None:
    """The request with its requester and its decision's record loaded (as
    ``select_related("requester", "record")``); None: no such request."""
    row = _one("decided", [request_id])
    if row is None:
        return None
    request, request.requester, record = sqlrows.instances(
        row, ApprovalRequest, User, ApprovalRecord
    )
    _record_set(request, record)
    return request


def _record_set(request: ApprovalRequest, record: ApprovalRecord) -> None:
    """``request.record`` as select_related leaves it: the record, or known to be none (the
    LEFT JOIN's NULLs)."""
    if record.pk is None:
        ApprovalRequest.record.related.set_cached_value(request, None)
    else:
        request.record = record


# Hand-written for the same reason: the verification right before every approved call runs
# (approvals.services.approval_verify_and_consume, in the runtime's transaction) reads the
# action's latest approved request with its record.
_APPROVED_SQL = """
SELECT {request}, {record}
  FROM approvals_approvalrequest q
  LEFT JOIN approvals_approvalrecord c ON c.request_id = q.id
 WHERE q.action_ref = %s AND q.status = %s
 ORDER BY q.decided_at DESC
 LIMIT 1
"""


def approval_request_approved(*, action_ref: str) -> ApprovalRequest | None:
    """The action's latest approved request with its record loaded (as
    ``select_related("record")``, latest decision first); None: no approved request."""
    row = _one("approved", [action_ref, RequestStatus.APPROVED.value])
    if row is None:
        return None
    request, record = sqlrows.instances(row, ApprovalRequest, ApprovalRecord)
    _record_set(request, record)
    return request


@cache
def _sql(name: str) -> str:
    """Statement ``name`` with its column lists: the request (q), the record (c), a user (u)."""
    statement = {"latest": _LATEST_SQL, "decided": _DECIDED_SQL, "approved": _APPROVED_SQL}[name]
    return statement.format(
        request=sqlrows.columns(ApprovalRequest, "q"),
        record=sqlrows.columns(ApprovalRecord, "c"),
        user=sqlrows.columns(User, "u"),
    )


def _one(name: str, params: list[Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(_sql(name), params)
        return cursor.fetchone()


def approval_request_pending(*, request_id: Any) -> ApprovalRequest | None:
    return (
        ApprovalRequest.objects.filter(pk=request_id, status=RequestStatus.PENDING)
        .select_related("requester")
        .first()
    )


def approval_requests_of(*, requester: User, limit: int = 20) -> list[ApprovalRequest]:
    """A requester's own approval requests, newest first, with their decisions."""
    return list(
        ApprovalRequest.objects.filter(requester=requester)
        .select_related("record", "record__approver")
        .order_by("-created_at")[:limit]
    )


def approvals_pending(*, approver: User) -> list[ApprovalRequest]:
    """What an approver may decide: pending requests of others, soonest deadline first."""
    return list(
        ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
        .exclude(requester=approver)
        .select_related("requester")
        .order_by("deadline")
    )


def approvals_pending_count(*, approver: User) -> int:
    return (
        ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
        .exclude(requester=approver)
        .count()
    )


def approvals_stale() -> list[ApprovalRequest]:
    """Approved actions that drifted or expired and wait for a fresh approval."""
    fresh = ApprovalRequest.objects.filter(status=RequestStatus.PENDING).values("action_ref")
    return list(
        ApprovalRequest.objects.filter(status=RequestStatus.STALE)
        .exclude(action_ref__in=fresh)
        .select_related("requester", "record", "record__approver")
        .order_by("-decided_at")
    )


def approvals_decided(*, limit: int = 50) -> list[ApprovalRequest]:
    return list(
        ApprovalRequest.objects.exclude(status=RequestStatus.PENDING)
        .select_related("requester", "record", "record__approver")
        .order_by("-decided_at")[:limit]
    )


def approval_audit_for(*, request_id: Any) -> list[ApprovalAudit]:
    return list(ApprovalAudit.objects.filter(request_id=request_id).select_related("actor"))


def approval_pending_for_run(*, run_ref: str, approver: User) -> bool:
    """Whether a request of this run waits for a decision this approver may take (not their
    own): what lets an approver watch the run."""
    return (
        ApprovalRequest.objects.filter(run_ref=run_ref, status=RequestStatus.PENDING)
        .exclude(requester=approver)
        .exists()
    )


def approval_requests_for_run(*, run_ref: str) -> list[ApprovalRequest]:
    """Every approval request of one run (by the runtime's run reference), oldest first, with
    its signed record, approver and audit trail."""
    return list(
        ApprovalRequest.objects.filter(run_ref=run_ref)
        .select_related("requester", "record", "record__approver")
        .prefetch_related("audit__actor")
        .order_by("created_at")
    )


# --- the approver's present: each request re-checked, each decision with its outcome ----------

STALE_OUTCOME = gettext_noop(
    "Approved, but it did not run: %(problems)s Nothing was done; it waits for a fresh approval."
)
CHANGED_BEFORE_RUN = gettext_noop("what it acts on changed before it could run.")


@dataclass(frozen=True)
class Card:
    """A pending request as an approver decides it: what a re-check against now found (stored
    messages; empty when it can still succeed as requested)."""

    request: ApprovalRequest
    problems: list[dict[str, Any]]

    @property
    def pk(self) -> Any:
        return self.request.pk


@dataclass(frozen=True)
class Decided:
    """A decided request with what became of it (a stored message, None when nothing ran)."""

    request: ApprovalRequest
    outcome: dict[str, Any] | None
    state: str = ""


def approval_overtaken_problems(*, request: ApprovalRequest) -> list[dict[str, Any]]:
    """What stood in the way of a request closed as overtaken, as stored messages (from its
    audit row: by then its action is no longer waiting, so a re-check would say only that)."""
    row = (
        ApprovalAudit.objects.filter(request=request, event=AuditEvent.OVERTAKEN)
        .values_list("detail", flat=True)
        .first()
    )
    return list((row or {}).get("problems") or [])


def approval_card(*, request: ApprovalRequest) -> Card:
    return Card(request, hooks.request_recheck(request))


def approval_cards(*, approver: User) -> list[Card]:
    return [approval_card(request=r) for r in approvals_pending(approver=approver)]


def _with_outcomes(requests: list[ApprovalRequest]) -> list[Decided]:
    ran = [r for r in requests if r.status == RequestStatus.APPROVED]
    outcomes = hooks.request_outcomes(ran)
    decided = []
    for request in requests:
        if request.status == RequestStatus.STALE:
            problems = hooks.request_recheck(request) or [{"msgid": CHANGED_BEFORE_RUN}]
            outcome: dict[str, Any] | None = {
                "msgid": STALE_OUTCOME,
                "params": {"problems": problems},
            }
            decided.append(Decided(request, outcome, "not_run"))
            continue
        found = (
            outcomes.get(request.action_ref) if request.status == RequestStatus.APPROVED else None
        )
        decided.append(
            Decided(request, found["message"] if found else None, found["state"] if found else "")
        )
    return decided


def approvals_decided_with_outcomes(*, limit: int = 50) -> list[Decided]:
    """The Decided list: each decision with the outcome of what it allowed, not the decision
    alone ("approved, but R12 was taken meanwhile: nothing was booked")."""
    return _with_outcomes(approvals_decided(limit=limit))


def approval_requests_of_with_outcomes(*, requester: User, limit: int = 20) -> list[Decided]:
    """A requester's own requests with their outcomes (pending ones: what a re-check found)."""
    requests = approval_requests_of(requester=requester, limit=limit)
    decided = {
        d.request.pk: d
        for d in _with_outcomes([r for r in requests if r.status != RequestStatus.PENDING])
    }
    return [decided.get(r.pk) or Decided(r, _pending_note(r), "pending") for r in requests]


PENDING_CANNOT = gettext_noop("Checked just now: %(problems)s It cannot be approved as it is.")


def _pending_note(request: ApprovalRequest) -> dict[str, Any] | None:
    problems = hooks.request_recheck(request)
    return {"msgid": PENDING_CANNOT, "params": {"problems": problems}} if problems else None


@dataclass(frozen=True)
class Detail:
    request: ApprovalRequest
    problems: list[dict[str, Any]]
    outcome: dict[str, Any] | None
    history: list[ApprovalAudit]
    state: str = ""


def approval_detail(*, request_id: Any, viewer: User) -> Detail | None:
    """One request with its re-check (pending) or outcome (decided) and its whole history, for
    an approver or the requester; anyone else reads it as absent."""
    request = (
        ApprovalRequest.objects.filter(pk=request_id)
        .select_related("requester", "record", "record__approver")
        .first()
    )
    if request is None:
        return None
    if request.requester_id != viewer.pk and Role.APPROVER not in user_roles(user=viewer):
        return None
    history = list(
        ApprovalAudit.objects.filter(request=request).select_related("actor").order_by("at", "pk")
    )
    if request.status == RequestStatus.PENDING:
        return Detail(request, hooks.request_recheck(request), None, history)
    row = _with_outcomes([request])[0]
    return Detail(request, [], row.outcome, history, row.state)
