"""The promises a fault must never break, checked on the database after every chaos trial (and
at the end of the load benchmark, bench/load.py):

- no two confirmed bookings of a room overlap;
- every booking has exactly one receipt: one completed idempotency record under its key whose
  response names it, and every succeeded reserve under that key names the same booking;
- nothing doubled: a run made at most one booking per write it was allowed;
- nothing lost: every succeeded reserve names a booking that exists;
- every run is terminal, or waits for a human with a reason (an open approval request, or a
  write in the reconciliation queue);
- every run's trace is numbered 1..n without a gap.

`invariants_check` returns the counts (all 0 when the promises hold) and a few samples of each
violation, so that a failing trial says what broke."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

OVERLAPS = """
SELECT a.code, b.code
  FROM bookings_booking a
  JOIN bookings_booking b
    ON a.room_id = b.room_id AND a.id < b.id AND a.during && b.during
 WHERE a.status = 'confirmed' AND b.status = 'confirmed'
"""

TRACE_GAPS = """
SELECT r.id::text, r.event_seq, count(e.id), coalesce(min(e.seq), 0), coalesce(max(e.seq), 0)
  FROM agentops_agentrun r
  LEFT JOIN agentops_traceevent e ON e.run_id = r.id
 GROUP BY r.id, r.event_seq
HAVING count(e.id) <> r.event_seq
    OR coalesce(max(e.seq), 0) <> r.event_seq
    OR (count(e.id) > 0 AND min(e.seq) <> 1)
"""

RESERVE = "reserve_room"


@dataclass
class Report:
    runs: int = 0
    bookings: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    samples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def violation(self, kind: str, sample: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if len(self.samples[kind]) < 5:
            self.samples[kind].append(sample)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def as_json(self) -> dict[str, Any]:
        kinds = ("overlaps", "receipts", "duplicates", "lost", "hanging", "trace_gaps")
        return {
            "runs": self.runs,
            "bookings": self.bookings,
            **{kind: self.counts.get(kind, 0) for kind in kinds},
            "samples": {k: v for k, v in self.samples.items() if v},
        }

    def __str__(self) -> str:
        return f"invariants violated: {self.as_json()}"


def _booking_of(envelope: Any) -> str | None:
    if not isinstance(envelope, dict) or not envelope.get("ok"):
        return None
    data = envelope.get("data")
    return data.get("booking_id") if isinstance(data, dict) else None


def _hanging(run: Any, open_requests: set[str], needs_human: set[str]) -> str | None:
    """Why a run that is not terminal is left hanging, or None if it waits for a human."""
    if run.is_terminal:
        return None
    if run.status == "waiting_approval" and str(run.pk) in open_requests:
        return None
    if run.status == "reconciling" and str(run.pk) in needs_human:
        return None
    return f"run {run.pk} {run.status} ({run.kind}, turn {run.turn})"


def invariants_check() -> Report:
    from django.db import connection

    from agentops.models import Action, AgentRun, IdempotencyRecord
    from approvals.models import ApprovalRequest
    from bookings.models import Booking

    report = Report()
    with connection.cursor() as cursor:
        cursor.execute(OVERLAPS)
        for a, b in cursor.fetchall():
            report.violation("overlaps", f"{a} overlaps {b}")
        cursor.execute(TRACE_GAPS)
        for run_id, seq, count, lo, hi in cursor.fetchall():
            report.violation(
                "trace_gaps", f"run {run_id}: event_seq {seq}, {count} events {lo}..{hi}"
            )

    bookings = list(Booking.objects.values("code", "idempotency_key", "run_id", "status"))
    report.bookings = len(bookings)
    records = {
        r.key: r
        for r in IdempotencyRecord.objects.filter(key__in=[b["idempotency_key"] for b in bookings])
    }
    reserves = defaultdict(list)
    for key, status, result in Action.objects.filter(tool=RESERVE).values_list(
        "idempotency_key", "status", "result"
    ):
        reserves[key].append((status, result))
    codes = {b["code"] for b in bookings}
    for b in bookings:
        record = records.get(b["idempotency_key"])
        if record is None or record.status != "completed":
            state = "none" if record is None else record.status
            report.violation("receipts", f"{b['code']}: idempotency record {state}")
        elif _booking_of(record.response) != b["code"]:
            report.violation(
                "receipts", f"{b['code']}: record names {_booking_of(record.response)}"
            )
        named = {
            _booking_of(r) for s, r in reserves.get(b["idempotency_key"], []) if s == "succeeded"
        }
        if named != {b["code"]}:
            report.violation(
                "receipts", f"{b['code']}: succeeded reserves name {sorted(map(str, named))}"
            )
    for key, attempts in reserves.items():
        for status, result in attempts:
            code = _booking_of(result)
            if status == "succeeded" and code is not None and code not in codes:
                report.violation("lost", f"{key}: succeeded as {code}, which does not exist")

    per_run = defaultdict(list)
    for b in bookings:
        if b["run_id"]:
            per_run[b["run_id"]].append(b["code"])
    runs = list(AgentRun.objects.all())
    report.runs = len(runs)
    allowed = {str(r.pk): int((r.delegation or {}).get("max_writes") or 0) for r in runs}
    for run_id, made in per_run.items():
        if len(made) > allowed.get(run_id, 0):
            report.violation("duplicates", f"run {run_id} made {sorted(made)}")

    open_requests = set(
        ApprovalRequest.objects.filter(status__in=["pending", "stale"]).values_list(
            "run_ref", flat=True
        )
    )
    needs_human = {
        str(r) for r in Action.objects.filter(status="needs_human").values_list("run_id", flat=True)
    }
    for run in runs:
        why = _hanging(run, open_requests, needs_human)
        if why:
            report.violation("hanging", why)
    return report
