"""The audit log: every tool call (the runtime's own Action rows) and every human decision
(accounts' AuditEntry rows) as one time-ordered list, filtered in the database, paged, and
exported with personal data minimised unless the admin asks for it (an export is itself audited).
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import date, datetime, time, timedelta
from enum import StrEnum
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import CharField, Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from accounts.models import AuditAction, AuditEntry, Role, User
from accounts.services import audit_record
from agentops.models import Action, ActionStatus

REDACTED = "[redacted]"
# Free text people typed, inside an audit entry's detail: personal data.
FREE_TEXT_KEYS = frozenset({"reason", "note", "notes", "comment", "text", "request", "goal"})
EXPORT_CHUNK = 500


class RowKind(StrEnum):
    TOOL = "tool"  # a tool call, proposed by a model or made directly
    HUMAN = "human"  # a decision a person took


class ExportFormat(StrEnum):
    CSV = "csv"
    JSONL = "jsonl"


@dataclass(frozen=True)
class AuditFilters:
    """What the admin narrowed the log to; empty means everything."""

    user: str = ""  # username or employee id, exact, case-insensitive
    kind: str = ""  # RowKind or ""
    tool: str = ""
    outcome: str = ""  # an ActionStatus (tool calls) or an AuditAction (human decisions)
    risk: str = ""
    date_from: date | None = None
    date_to: date | None = None  # inclusive
    drills: bool = False  # include drill and sandbox rows (hidden by default)

    def as_json(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items() if v}


def _tool_rows(f: AuditFilters) -> QuerySet | None:
    if f.kind == RowKind.HUMAN or (f.outcome and f.outcome not in ActionStatus.values):
        return None
    qs = Action.objects.all()
    if f.user:
        qs = qs.filter(run__subject__in=_users(f.user))
    if f.tool:
        qs = qs.filter(tool=f.tool)
    if f.outcome:
        qs = qs.filter(status=f.outcome)
    if f.risk:
        qs = qs.filter(risk=f.risk)
    qs = qs.filter(**_window("created_at", f)).annotate(drill=_sandboxed("run__subject"))
    if not f.drills:
        qs = qs.filter(drill=False)
    return qs.annotate(
        kind=Value(RowKind.TOOL.value, output_field=CharField()),
        at=F("created_at"),
        username=F("run__subject__username"),
        employee_id=Coalesce(F("run__subject__employee_id"), Value("")),
        name=F("tool"),
        outcome=F("status"),
        risk_=F("risk"),
        run_ref=Cast(F("run_id"), CharField()),
        row_ref=Cast(F("id"), CharField()),
    ).values_list(*_SELECT)


def _human_rows(f: AuditFilters) -> QuerySet | None:
    if f.kind == RowKind.TOOL or f.tool or f.risk:
        return None
    if f.outcome and f.outcome not in AuditAction.values:
        return None
    qs = AuditEntry.objects.all()
    if f.user:
        qs = qs.filter(actor__in=_users(f.user))
    if f.outcome:
        qs = qs.filter(action=f.outcome)
    qs = qs.filter(**_window("at", f)).annotate(drill=_sandboxed("actor"))
    if not f.drills:
        qs = qs.filter(drill=False)
    return qs.annotate(
        kind=Value(RowKind.HUMAN.value, output_field=CharField()),
        username=F("actor__username"),
        employee_id=Coalesce(F("actor__employee_id"), Value("")),
        name=F("action"),
        outcome=F("action"),
        risk_=Value("", output_field=CharField()),
        run_ref=Cast(F("run_id"), CharField()),
        row_ref=Cast(F("id"), CharField()),
    ).values_list(*_SELECT)


_SELECT = (
    "kind",
    "at",
    "username",
    "employee_id",
    "name",
    "outcome",
    "risk_",
    "run_ref",
    "row_ref",
    "drill",
)


def _sandboxed(user_path: str) -> Exists:
    """Whether the row's person is a drill identity (the sandbox group): a drill's row."""
    return Exists(Group.objects.filter(name=Role.SANDBOX, user=OuterRef(user_path)))


def _users(text: str) -> QuerySet:
    return User.objects.filter(Q(username__iexact=text) | Q(employee_id__iexact=text)).values("pk")


def _window(field: str, f: AuditFilters) -> dict[str, datetime]:
    """Local dates to an aware, half-open range."""
    bounds: dict[str, datetime] = {}
    zone = timezone.get_current_timezone()
    if f.date_from:
        bounds[f"{field}__gte"] = datetime.combine(f.date_from, time.min, tzinfo=zone)
    if f.date_to:
        bounds[f"{field}__lt"] = datetime.combine(f.date_to + timedelta(days=1), time.min, zone)
    return bounds


@dataclass(frozen=True)
class AuditRow:
    kind: str
    at: datetime
    username: str
    employee_id: str
    name: str
    outcome: str
    risk: str
    run: str
    ref: str
    drill: bool = False  # a drill's or sandbox row


def audit_rows(*, filters: AuditFilters) -> QuerySet:
    """Tool calls and human decisions matching ``filters``, newest first, as tuples in the
    order of ``AuditRow``'s fields (one UNION ALL statement; page it by slicing)."""
    parts = [qs for qs in (_tool_rows(filters), _human_rows(filters)) if qs is not None]
    if not parts:
        return AuditEntry.objects.none().values_list("id")
    qs = parts[0] if len(parts) == 1 else parts[0].union(parts[1], all=True)
    return qs.order_by("-at", "-row_ref")


def audit_row(values: Iterable[Any]) -> AuditRow:
    return AuditRow(*values)


@dataclass(frozen=True)
class RowDetail:
    """What the list shows beside a row: the call's arguments and answer, or the decision's
    detail and target."""

    target: str = ""
    summary: str = ""
    idempotency_key: str = ""
    duration_ms: int | None = None
    reason: str = ""
    request: str = ""  # the run's request text: personal data
    detail: dict[str, Any] | None = None
    # The key facts as columns: the room a call acts on and the time it books, its arguments
    # and answer whole (shown behind a disclosure), the refusal's message in the reader's words.
    room: str = ""
    span: tuple[str, str] | None = None
    params: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    said: dict[str, Any] | None = None


def audit_details(*, rows: list[AuditRow]) -> dict[str, RowDetail]:
    """The details of a page (or chunk) of rows, by ref, in two statements."""
    tool_refs = [r.ref for r in rows if r.kind == RowKind.TOOL]
    human_refs = [int(r.ref) for r in rows if r.kind == RowKind.HUMAN]
    found: dict[str, RowDetail] = {}
    for action in Action.objects.filter(pk__in=tool_refs).select_related("run"):
        result = action.result or {}
        found[str(action.pk)] = RowDetail(
            target=f"action:{action.pk}",
            summary=_short(action.params),
            idempotency_key=action.idempotency_key,
            duration_ms=action.duration_ms,
            reason=str(result.get("reason") or result.get("code") or ""),
            request=action.run.goal,
            room=_room(action.params, result),
            span=_span(action.params, result),
            params=action.params,
            result=result,
            said=_said(result),
        )
    for entry in AuditEntry.objects.filter(pk__in=human_refs):
        found[str(entry.pk)] = RowDetail(
            target=entry.target, summary=_short(entry.detail), detail=entry.detail
        )
    return found


def _dict(value: Any) -> dict[str, Any]:
    """A stored JSON value when it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _room(params: Any, result: dict[str, Any]) -> str:
    data = _dict(result.get("data"))
    params = _dict(params)
    return str(params.get("room_id") or data.get("room_id") or "")


def _span(params: Any, result: dict[str, Any]) -> tuple[str, str] | None:
    data = _dict(result.get("data"))
    for source in (_dict(params), data):
        if source.get("start_at") and source.get("end_at"):
            return str(source["start_at"]), str(source["end_at"])
    return None


def _said(result: dict[str, Any]) -> dict[str, Any] | None:
    """A refusal as a stored message (the domain's msgid and params), or its English text."""
    detail = _dict(result.get("detail"))
    if detail.get("msgid"):
        return {"msgid": detail["msgid"], "params": detail.get("params") or {}}
    if result.get("message"):
        return {"msgid": "", "text": str(result["message"])}
    return None


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact(detail: dict[str, Any] | None) -> dict[str, Any]:
    """A copy with every free-text value (reasons, notes) replaced, at any depth."""

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if key in FREE_TEXT_KEYS and value not in ("", None):
            return REDACTED
        return value

    return walk(detail or {})


# --- export ------------------------------------------------------------------------------------

EXPORT_FIELDS = (
    "at",
    "kind",
    "username",
    "employee_id",
    "name",
    "outcome",
    "risk",
    "run_id",
    "ref",
    "target",
    "idempotency_key",
    "duration_ms",
    "reason",
    "request",
    "detail",
)


@transaction.atomic
def audit_export_record(
    *, actor: User, export_format: ExportFormat, personal_data: bool, filters: AuditFilters
) -> None:
    """Audit that ``actor`` exported the log (and whether with personal data), before any byte
    of it leaves."""
    audit_record(
        actor=actor,
        action=AuditAction.AUDIT_EXPORTED,
        target=f"audit:{export_format.value}",
        detail={
            "format": export_format.value,
            "personal_data": personal_data,
            "filters": filters.as_json(),
        },
    )


def audit_export_records(*, filters: AuditFilters, personal_data: bool) -> Iterator[dict]:
    """Every matching row as a flat record, newest first, a chunk of rows at a time (the
    whole log never sits in memory). Request text and free-text detail are redacted unless
    ``personal_data``."""
    chunk: list[AuditRow] = []
    for values in audit_rows(filters=filters).iterator(chunk_size=EXPORT_CHUNK):
        chunk.append(audit_row(values))
        if len(chunk) == EXPORT_CHUNK:
            yield from _records(chunk, personal_data)
            chunk = []
    yield from _records(chunk, personal_data)


def _records(rows: list[AuditRow], personal_data: bool) -> Iterator[dict]:
    details = audit_details(rows=rows)
    for row in rows:
        d = details.get(row.ref, RowDetail())
        request = d.request if personal_data else (REDACTED if d.request else "")
        detail = d.detail if personal_data else redact(d.detail)
        yield {
            "at": row.at.isoformat(),
            "kind": row.kind,
            "username": row.username,
            "employee_id": row.employee_id,
            "name": row.name,
            "outcome": row.outcome,
            "risk": row.risk,
            "run_id": row.run or "",
            "ref": row.ref,
            "target": d.target,
            "idempotency_key": d.idempotency_key,
            "duration_ms": d.duration_ms,
            "reason": d.reason,
            "request": request,
            "detail": detail or {},
        }


# What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell[T](value: T) -> T | str:
    """A CSV cell a spreadsheet shows as text: a string that starts like a formula is prefixed
    with a single quote, even one that reads as a negative number (it is text; OWASP prefixes
    untrusted text anyway). Numbers the product counts itself (ints, floats) stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def audit_export_chunks(
    *, filters: AuditFilters, personal_data: bool, export_format: ExportFormat
) -> Iterator[str]:
    """The export as text pieces for a streaming response: CSV with a header row, every cell
    safe to open in a spreadsheet (``csv_cell``), or one JSON object per line."""
    records = audit_export_records(filters=filters, personal_data=personal_data)
    if export_format == ExportFormat.JSONL:
        for record in records:
            yield json.dumps(record, ensure_ascii=False, default=str) + "\n"
        return
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=EXPORT_FIELDS)
    writer.writeheader()
    for record in records:
        record["detail"] = json.dumps(record["detail"], ensure_ascii=False, default=str)
        writer.writerow({field: csv_cell(value) for field, value in record.items()})
        if buffer.tell() > 16_384:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def parse_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(text))
    except ValueError:
        return None
