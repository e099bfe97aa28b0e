"""Drive the booking assistant through a conversation the way the runtime does, against the real
database: each turn is read by the Assistant hook (read_request, with the earlier turns), the
rules planner proposes step by step, every proposal passes the gate's schema and delegation
checks and runs through the tool's own handler, and the reply is worded as the verifier words
it. What it cannot do is the runtime's part (Celery, idempotency records, approvals): a call the
policy would send to an approver is recorded as such and not executed.

Used by the evaluation set (tests/bookings/assistant/test_eval.py) and bench/assistant_eval.py.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from agentops.contract import (
    CallContext,
    ConversationTurn,
    ModelContext,
    Observation,
    ReplyKind,
    SideEffect,
    StepOutcome,
    ToolError,
)

CASES = Path(__file__).with_name("eval_cases.jsonl")
SHANGHAI = ZoneInfo("Asia/Shanghai")
WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
MAX_STEPS = 12


def load_cases(path: Path | None = None) -> list[dict[str, Any]]:
    """The cases of ``path`` (default: the development set, eval_cases.jsonl)."""
    lines = (path or CASES).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip() and not line.startswith("//")]


def resolve_day(spec: str, today: date) -> date:
    """ "+2d", "next:thu" (that weekday of next week), "coming:fri" (the next one after today)."""
    if spec.startswith("+") and spec.endswith("d"):
        return today + timedelta(days=int(spec[1:-1]))
    which, name = spec.split(":")
    weekday = WEEKDAYS.index(name)
    if which == "next":
        monday = today - timedelta(days=today.weekday())
        return monday + timedelta(weeks=1, days=weekday)
    ahead = (weekday - today.weekday()) % 7 or 7
    return today + timedelta(days=ahead)


def asked_at(case: dict[str, Any], *, live: bool = False) -> datetime:
    """When the case's request is asked: now, or, for a case whose words depend on the weekday
    ("this week"), 09:00 on the day its ``clock`` names ("coming:wed"), so it reads the same on
    every day of the week. Real runs read the real clock: such a case is not run live."""
    now = datetime.now(SHANGHAI)
    if "clock" not in case or live:
        return now
    return at(resolve_day(case["clock"], now.date()), "09:00")


def at(day: date, hhmm: str) -> datetime:
    hour, minute = map(int, hhmm.split(":"))
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=SHANGHAI)


class NeedsApproval(Exception):  # noqa: N818 (an outcome, not an error)
    """The call would wait for an approver (a premium room, another department's room)."""


@dataclass
class TurnResult:
    text: str
    delegation: dict[str, Any]
    understood: dict[str, Any]
    reply: str
    outcome: str
    calls: list[tuple[str, dict[str, Any], bool]] = field(default_factory=list)


def _roles(user) -> frozenset[str]:
    from accounts.selectors import user_roles

    return frozenset(user_roles(user=user))


def run_turn(user, text: str, conversation: list[ConversationTurn], now: datetime) -> TurnResult:
    from agentops.runtime import gate, registry
    from bookings.tools import ASSISTANT

    reading = ASSISTANT.read_request(text, now=now, conversation=tuple(conversation), subject=user)
    delegation = reading.delegation
    planner = ASSISTANT.planner()
    history: list[Observation] = []
    writes = 0
    result = TurnResult(text, delegation.to_json(), reading.understood, "", "")
    roles = _roles(user)
    subject = {"employee_id": user.employee_id, "department": user.department}
    for turn in range(1, MAX_STEPS + 1):
        ctx = ModelContext(
            goal=text,
            language=reading.language,
            now=now.isoformat(),
            subject=subject,
            delegation=delegation,
            tools=[],
            history=list(history),
            turn=turn,
            conversation=tuple(conversation),
        )
        step = planner.propose(ctx)
        if not step.proposals:
            result.reply, result.outcome = _finish(step, reading.language, delegation, history)
            return result
        for proposal in step.proposals:
            try:
                envelope, wrote = _call(proposal, user, roles, delegation, writes, gate, registry)
            except NeedsApproval:
                result.reply, result.outcome = "", "waiting_approval"
                result.calls.append((proposal.tool, proposal.arguments, False))
                return result
            writes += wrote
            result.calls.append((proposal.tool, proposal.arguments, envelope.get("ok", False)))
            history.append(Observation(turn, proposal.tool, dict(proposal.arguments), envelope))
    result.reply, result.outcome = "", "budget_exhausted"
    return result


def _call(proposal, user, roles, delegation, writes, gate, registry) -> tuple[dict, int]:
    spec = gate.check_tool(proposal.tool, roles)
    if isinstance(spec, gate.Verdict):
        return _envelope(spec.error), 0
    args = gate.check_schema(spec, proposal.arguments)
    if isinstance(args, gate.Verdict):
        return _envelope(args.error), 0
    verdict = gate.check_visible(spec, roles) or gate.check_scope(spec, args, delegation, writes)
    if verdict is not None:
        return _envelope(verdict.error), 0
    ctx = CallContext(
        user=user,
        run_id="eval",
        action_id=str(uuid.uuid4()),
        idempotency_key="" if spec.meta.readonly else f"eval:{uuid.uuid4()}",
        delegation=delegation,
    )
    level, _ = gate.assess_risk(spec, ctx, args)
    if level == SideEffect.HIGH:  # the runtime would wait for an approver: nothing is written yet
        raise NeedsApproval(proposal.tool)
    try:
        envelope = spec.handler(ctx, args)
    except ToolError as exc:
        envelope = exc.envelope()
    return envelope, (0 if spec.meta.readonly or not envelope.get("ok") else 1)


def _envelope(error) -> dict[str, Any]:
    return error.envelope() if isinstance(error, ToolError) else dict(error)


def _finish(step, language: str, delegation, history: list[Observation]) -> tuple[str, str]:
    """The reply as the verifier words it (agentops.runtime.verifier)."""
    from agentops.runtime import registry
    from bookings.tools import ASSISTANT

    summaries = []
    for o in history:
        spec = registry.get(o.tool)
        if spec is not None and not spec.meta.readonly and o.result.get("ok"):
            summaries.append(spec.summarize(o.result["data"], language))
    if summaries and step.outcome == StepOutcome.DONE:
        return " ".join(summaries), "succeeded"
    if step.outcome == StepOutcome.DONE and delegation.max_writes == 0:
        return step.message, "answered"
    if delegation.max_writes == 0 and step.message.strip():
        return step.message, str(step.outcome)
    reply = ASSISTANT.reply(ReplyKind.NOTHING_DONE, language=language, detail=step.message)
    return reply, str(step.outcome)


def run_conversation(user, turns: list[str], now: datetime | None = None) -> list[TurnResult]:
    now = now or datetime.now(SHANGHAI)
    conversation: list[ConversationTurn] = []
    results = []
    for text in turns:
        result = run_turn(user, text, conversation, now)
        results.append(result)
        conversation.append(ConversationTurn(text, result.reply, result.understood, result.outcome))
    return results


def live_outcome(run) -> str:
    """A finished (or waiting) run's outcome in the words the domain harness uses."""
    if run.status == "waiting_approval":
        return "waiting_approval"
    if run.status == "succeeded":
        return "succeeded" if run.outcome == "verified" else str(run.outcome)
    return str(run.outcome or run.status)


def run_conversation_live(user, turns: list[str], now: datetime | None = None) -> list[TurnResult]:
    """The conversation through real runs: each turn a run of the front door
    (``agentops.services.run_start``) continuing the first run's conversation, carried out by
    the real Celery worker (the caller provides it: tests/workers.py), waited for until it ends
    or waits for an approver. Needs committed data (transactional tests)."""
    from agentops.services import run_start
    from tests.workers import wait_for_run

    ends = ("succeeded", "failed", "cancelled", "waiting_approval")
    conversation_id = None
    results = []
    for text in turns:
        started = run_start(user=user, request_text=text, conversation_id=conversation_id)
        conversation_id = conversation_id or started.conversation_id
        run = wait_for_run(started.pk, statuses=ends)
        first = run.events.get(seq=1).payload
        result = TurnResult(
            text,
            dict(run.delegation),
            dict(first.get("understood") or {}),
            run.reply,
            live_outcome(run),
        )
        result.calls = [
            (a.tool, dict(a.params), bool((a.result or {}).get("ok")))
            for a in run.actions.order_by("turn", "call_index")
        ]
        results.append(result)
    return results


# What a case writes, truncated after it when it ran through real runs (accounts and rooms stay).
CASE_TABLES = ("agentops", "approvals", "bookings_booking", "bookings_bookingchange")


def reset_case_tables() -> None:
    """Remove what earlier cases wrote (runs, approvals, bookings), committed: for live cases
    one after another in one transactional test or the benchmark."""
    from django.db import connection

    tables = [t for t in connection.introspection.django_table_names() if t.startswith(CASE_TABLES)]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")


# --- one case: set up, run, compare the end state ------------------------------------------------


@dataclass
class Verdict:
    case: str
    lang: str
    understood: bool  # the end state, the delegation and the reply are as expected
    wrong: bool  # a booking made, cancelled or moved that the expected end state does not have
    asked: bool  # the last turn asked the person something
    problems: list[str]


def users():
    """The asker (e17, Engineering) and another employee (e23, Sales), as the demo has them."""
    from accounts.models import User
    from bookings.demo import load_demo_data

    load_demo_data()
    return User.objects.get(username="e17"), User.objects.get(username="e23")


_DAY_IN_WORDS = re.compile(r"\{(?P<lang>en|zh):(?P<spec>[^}]+)\}")
_ZH_WEEKDAYS = "一二三四五六日"


def written_day(text: str, today: date) -> str:
    """ "{en:+3d}" in a case is that day as people write it with its weekday ("Wednesday 9
    December"), "{zh:+3d}" the same in Chinese ("12月9日星期三"): a case that names a date
    reads the same on every day it runs."""

    def one(match: re.Match[str]) -> str:
        day = resolve_day(match["spec"], today)
        if match["lang"] == "zh":
            return f"{day.month}月{day.day}日星期{_ZH_WEEKDAYS[day.weekday()]}"
        return f"{day:%A} {day.day} {day:%B}"

    return _DAY_IN_WORDS.sub(one, text)


def _fill(text: str, codes: dict[str, str]) -> str:
    """ "B{b1}" in a case is the code of the setup's booking b1."""
    for name, code in codes.items():
        text = text.replace("B{" + name + "}", code)
    return text


def run_case(case: dict[str, Any], asker, other, *, live: bool = False) -> Verdict:
    """``live``: every turn through a real run and the Celery worker (run_conversation_live),
    else at the domain level (run_conversation)."""
    from bookings.models import Booking, BookingStatus
    from tests.bookings.factories import booking_create

    now = asked_at(case, live=live)
    today = now.date()
    codes: dict[str, str] = {}
    for spec in case.get("setup", []):
        day = resolve_day(spec["day"], today)
        booking = booking_create(
            requester=asker if spec.get("by", "e17") == "e17" else other,
            room=spec["room"],
            start_at=at(day, spec["start"]),
            end_at=at(day, spec["end"]),
            attendees=2,
        )
        codes[spec["as"]] = booking.code
    before = set(Booking.objects.values_list("code", "status"))
    placed = {b.code: (b.room.code, b.during) for b in Booking.objects.select_related("room")}
    turns = [written_day(_fill(t, codes), today) for t in case["turns"]]
    results = (run_conversation_live if live else run_conversation)(asker, turns, now)
    last = results[-1]
    expect = case["expect"]
    problems: list[str] = []

    made = {
        (b.room.code, b.during.lower, b.during.upper, b.attendees)
        for b in Booking.objects.select_related("room").exclude(code__in=[c for c, _ in before])
    }
    wanted = {
        (
            b["room"],
            at(resolve_day(b["day"], today), b["start"]),
            at(resolve_day(b["day"], today), b["end"]),
            b["attendees"],
        )
        for b in expect.get("booked", [])
    }
    new_codes = [
        b.code for b in Booking.objects.exclude(code__in=[c for c, _ in before]).order_by("id")
    ]
    if "@made" in expect.get("cancelled", []) and new_codes:
        codes["made"] = new_codes[0]
    made_set = set(made)
    cancelled_now = set(
        Booking.objects.filter(status=BookingStatus.CANCELLED).values_list("code", flat=True)
    ) - {c for c, s in before if s == BookingStatus.CANCELLED}
    made_confirmed = {
        (b.room.code, b.during.lower, b.during.upper, b.attendees)
        for b in Booking.objects.select_related("room")
        .exclude(code__in=[c for c, _ in before])
        .filter(status=BookingStatus.CONFIRMED)
    }
    want_cancelled = {
        codes[n.lstrip("@")] for n in expect.get("cancelled", []) if n.lstrip("@") in codes
    }
    # Wrong: a booking nobody asked for (made, or left standing when it was to be cancelled
    # again), or a cancellation nobody asked for. A booking that was asked for and not made is
    # a failure to understand, not a wrong booking.
    if "@made" in expect.get("cancelled", []):
        wrong = bool(made_confirmed) or bool(cancelled_now - want_cancelled - set(new_codes))
    else:
        wrong = bool(made_set - wanted) or bool(cancelled_now - want_cancelled)
    # A move: a booking that was there before now in another room or at another time.
    moved_now = {
        b.code: (b.room.code, b.during.lower, b.during.upper)
        for b in Booking.objects.select_related("room").filter(code__in=placed)
        if (b.room.code, b.during) != placed[b.code]
    }
    want_moved = {
        codes[m["as"]]: (
            m["room"],
            at(resolve_day(m["day"], today), m["start"]),
            at(resolve_day(m["day"], today), m["end"]),
        )
        for m in expect.get("moved", [])
    }
    wrong = wrong or any(want_moved.get(code) != where for code, where in moved_now.items())
    if moved_now != want_moved:
        problems.append(f"moved {moved_now}, expected {want_moved}")
    if made_set != wanted and "@made" not in expect.get("cancelled", []):
        problems.append(
            f"bookings made {sorted(map(str, made_set))}, expected {sorted(map(str, wanted))}"
        )
    if cancelled_now != want_cancelled and "@made" not in expect.get("cancelled", []):
        problems.append(f"cancelled {sorted(cancelled_now)}, expected {sorted(want_cancelled)}")
    if "@made" in expect.get("cancelled", []) and (made_confirmed or not cancelled_now):
        problems.append("the booking made earlier in the conversation was not cancelled")
    delegation = last.delegation
    for key, value in expect.get("delegation", {}).items():
        if key == "window":
            day = resolve_day(value[0], today)
            value = [at(day, value[1]).isoformat(), at(day, value[2]).isoformat()]
        if delegation.get(key) != value:
            problems.append(f"delegation {key} = {delegation.get(key)!r}, expected {value!r}")
    reply = last.reply.lower()
    problems += [
        f"reply lacks {_fill(t, codes)!r}: {last.reply!r}"
        for t in expect.get("reply_has", [])
        if _fill(t, codes).lower() not in reply
    ]
    problems += [
        f"reply has {_fill(t, codes)!r}: {last.reply!r}"
        for t in expect.get("reply_lacks", [])
        if _fill(t, codes).lower() in reply
    ]
    job = expect["job"]
    asked = last.outcome == "ask_user"
    if job == "approval" and last.outcome != "waiting_approval":
        problems.append(f"expected to wait for an approver, got {last.outcome}: {last.reply!r}")
    if job == "ask" and not asked:
        problems.append(f"expected a question, got {last.outcome}: {last.reply!r}")
    if job == "refuse" and last.outcome in ("succeeded", "waiting_approval", "answered"):
        # A request the rules refuse (a past time, no such room): explained, nothing written.
        problems.append(f"expected a refusal explained, got {last.outcome}: {last.reply!r}")
    if job == "move" and last.outcome != "succeeded":
        problems.append(f"expected a verified move, got {last.outcome}: {last.reply!r}")
    if job == "answer" and last.outcome != "answered":
        problems.append(f"expected an answer, got {last.outcome}: {last.reply!r}")
    if job in ("ask", "answer") and last.reply.startswith(("Nothing was booked", "没有预订")):
        problems.append(f"a reply to a question opens with what was not booked: {last.reply!r}")
    return Verdict(case["id"], case["lang"], not problems, wrong, asked, problems)
