"""The operators' reconciliation queue: a write the reconciler could not settle is decided by a
human from a fresh lookup (accept a found receipt, retry with the same key when absence is
proven, abandon), audited and traced in the same transaction; the run resumes or ends from it.
Real worker, Redis and PostgreSQL; the unclear lookup is the only thing made up."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import AuditAction, AuditEntry
from agentops.contract import ReceiptLookup, ReceiptStatus
from agentops.models import (
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    IdempotencyRecord,
    RunStatus,
    TraceEvent,
)
from agentops.runtime import registry
from agentops.runtime.reconcile import (
    LOOKUP_FAILED,
    MAX_LOOKUP_FAILURES,
    action_reconcile,
    action_reconcile_decide,
)
from agentops.runtime.runs import run_start
from bookings.models import Booking, Room
from tests.accounts.factories import EMPLOYEES, user_create
from tests.conftest import slot
from tests.workers import wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=2)
REQUEST = f"Book a room on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"
OPERATORS = "operators"


@pytest.fixture
def operator(db):
    return user_create("o01", roles=[EMPLOYEES, OPERATORS])


@pytest.fixture
def unclear(monkeypatch):
    """reserve_room's lookup answers "unknown" while ``unclear["on"]``; then the real one."""
    spec = registry.get("reserve_room")
    state = {"on": True}

    def lookup(key: str) -> ReceiptLookup:
        if state["on"]:
            return ReceiptLookup(ReceiptStatus.UNKNOWN, detail="test: unclear")
        return spec.lookup_receipt(key)

    monkeypatch.setitem(
        registry._TOOLS, "reserve_room", dataclasses.replace(spec, lookup_receipt=lookup)
    )
    return state


def _waiting_for_human(user, fault: str) -> Action:
    """A run whose reserve_room went unclear (``lose_receipt``: the booking committed;
    ``timeout``: nothing was written) and that the reconciler handed to humans."""
    run = run_start(
        user=user,
        request_text=REQUEST,
        faults=[{"tool": "reserve_room", "kind": fault, "calls": [1]}],
    )
    action = wait_until(
        lambda: Action.objects.filter(run=run, status=ActionStatus.NEEDS_HUMAN).first(),
        message="the write to wait for a human",
    )
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.RECONCILING
    return action


def _state(action: Action) -> dict:
    """Every row a decision could touch."""
    action.refresh_from_db()
    run = AgentRun.objects.get(pk=action.run_id)
    return {
        "action": (action.status, action.attempts, action.result),
        "run": (run.status, run.outcome, run.reply, run.deadline),
        "bookings": list(Booking.objects.values_list("code", "status")),
        "versions": dict(Room.objects.values_list("code", "schedule_version")),
        "audit": AuditEntry.objects.count(),
        "events": TraceEvent.objects.filter(run_id=run.pk).count(),
        "keys": list(IdempotencyRecord.objects.values_list("key", "status")),
    }


def _decided_event(action: Action) -> TraceEvent:
    return TraceEvent.objects.get(action=action, kind="reconcile_decided")


def test_accepting_a_found_receipt_resumes_the_run_and_it_succeeds(worker, e17, operator, unclear):
    action = _waiting_for_human(e17, "lose_receipt")
    booking = Booking.objects.get()  # the write did commit; the reconciler could not tell
    unclear["on"] = False

    result = action_reconcile_decide(action_id=action.pk, operator=operator, decision="accept")

    assert result.ok, result.message
    run = wait_for_run(action.run_id)
    assert (run.status, run.outcome) == ("succeeded", "verified")
    assert booking.code in run.reply
    action.refresh_from_db()
    assert action.status == "succeeded" and action.attempts == 1  # taken, not written again
    assert action.result["data"]["booking_id"] == booking.code
    assert Booking.objects.count() == 1
    assert IdempotencyRecord.objects.get(key=action.idempotency_key).status == "completed"
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.target, entry.run_id) == (
        operator,
        AuditAction.RECONCILE_ACCEPTED,
        f"action:{action.pk}",
        run.pk,
    )
    assert entry.detail["receipt"]["booking_id"] == booking.code
    event = _decided_event(action)
    assert event.payload["decision"] == "accept" and event.payload["operator"] == "o01"
    kinds = list(run.events.filter(seq__gt=event.seq).values_list("kind", flat=True))
    assert kinds[0] == "run_resumed" and kinds[-1] == "run_finished" and "verified" in kinds


def test_retrying_with_the_same_key_books_once_when_absence_is_proven(
    worker, e17, operator, unclear
):
    action = _waiting_for_human(e17, "timeout")
    assert Booking.objects.count() == 0  # the timed-out call never ran
    unclear["on"] = False

    result = action_reconcile_decide(action_id=action.pk, operator=operator, decision="retry")

    assert result.ok, result.message
    run = wait_for_run(action.run_id)
    assert (run.status, run.outcome) == ("succeeded", "verified"), run.reply
    booking = Booking.objects.get()
    assert booking.idempotency_key == action.idempotency_key  # the same key, written once
    action.refresh_from_db()
    assert action.status == "succeeded" and action.attempts == 2
    assert AuditEntry.objects.get().action == AuditAction.RECONCILE_RETRIED
    event = _decided_event(action)
    assert event.payload["status"] == "absent" and event.payload["decision"] == "retry"
    after = list(run.events.filter(seq__gt=event.seq).values_list("kind", flat=True))
    assert after[:2] == ["reconcile_retry", "execution_started"]


def test_abandoning_ends_the_run_saying_nothing_was_booked(worker, e17, operator, unclear):
    action = _waiting_for_human(e17, "timeout")
    unclear["on"] = False
    versions = dict(Room.objects.values_list("code", "schedule_version"))

    result = action_reconcile_decide(action_id=action.pk, operator=operator, decision="abandon")

    assert result.ok, result.message
    run = AgentRun.objects.get(pk=action.run_id)
    assert (run.status, run.outcome) == ("failed", "abandoned")
    assert "Nothing was booked" in run.reply
    action.refresh_from_db()
    assert action.status == "failed" and action.result["code"] == "abandoned_by_operator"
    assert Booking.objects.count() == 0
    assert dict(Room.objects.values_list("code", "schedule_version")) == versions
    # The key answers the abandonment from now on: a replay never writes.
    record = IdempotencyRecord.objects.get(key=action.idempotency_key)
    assert record.status == "completed" and record.response["code"] == "abandoned_by_operator"
    assert AuditEntry.objects.get().action == AuditAction.RECONCILE_ABANDONED
    kinds = list(run.events.order_by("seq").values_list("kind", flat=True))
    assert kinds[-2:] == ["reconcile_decided", "run_finished"]


def test_accepting_settles_a_direct_call_too(worker, e17, operator, unclear, monkeypatch):
    """A screen's or the API's call (a one-action run) whose answer was lost."""
    from agentops.contract import LostReceiptError
    from agentops.runtime.direct import tool_call_governed

    spec = registry.get("reserve_room")

    def commit_then_lose(ctx, args):
        spec.handler(ctx, args)
        raise LostReceiptError("injected: answer lost after the commit")

    monkeypatch.setitem(
        registry._TOOLS, "reserve_room", dataclasses.replace(spec, handler=commit_then_lose)
    )
    envelope = tool_call_governed(
        user=e17,
        name="reserve_room",
        arguments={
            "room_id": "R7",
            "start_at": START.isoformat(),
            "end_at": END.isoformat(),
            "attendees": 3,
            "expected_version": Room.objects.get(code="R7").schedule_version,
        },
    )
    assert envelope["signal"] == "unknown_outcome"
    action = wait_until(
        lambda: Action.objects.filter(status=ActionStatus.NEEDS_HUMAN).first(),
        message="the direct call to wait for a human",
    )
    unclear["on"] = False

    assert action_reconcile_decide(action_id=action.pk, operator=operator, decision="accept").ok

    run = wait_for_run(action.run_id)
    assert (run.kind, run.status, run.outcome) == ("direct", "succeeded", "reconciled")
    assert Booking.objects.get().code == Action.objects.get().result["data"]["booking_id"]


def test_a_late_decision_gives_the_run_a_fresh_window_to_finish(worker, e17, operator, unclear):
    action = _waiting_for_human(e17, "lose_receipt")
    AgentRun.objects.filter(pk=action.run_id).update(
        deadline=timezone.now() - timedelta(minutes=10)
    )
    unclear["on"] = False

    assert action_reconcile_decide(action_id=action.pk, operator=operator, decision="accept").ok
    run = wait_for_run(action.run_id)
    assert (run.status, run.outcome) == ("succeeded", "verified")
    assert run.deadline > timezone.now()


@pytest.mark.parametrize(
    ("fault", "decision", "code"),
    [
        ("timeout", "accept", "lookup_disagrees"),  # nothing to accept: absent now
        ("lose_receipt", "retry", "lookup_disagrees"),  # a receipt exists: no second write
        ("lose_receipt", "abandon", "lookup_disagrees"),  # would say "not booked" wrongly
        ("timeout", "book it", "bad_decision"),
    ],
)
def test_a_decision_the_lookup_does_not_support_is_refused_and_writes_nothing(
    worker, e17, operator, unclear, fault, decision, code
):
    action = _waiting_for_human(e17, fault)
    unclear["on"] = False
    before = _state(action)

    result = action_reconcile_decide(action_id=action.pk, operator=operator, decision=decision)

    assert (result.ok, result.code) == (False, code)
    assert _state(action) == before


def test_only_abandoning_is_possible_while_the_lookup_cannot_tell(worker, e17, operator, unclear):
    action = _waiting_for_human(e17, "lose_receipt")  # unclear["on"] stays: still unknown
    before = _state(action)
    for decision in ("accept", "retry"):
        result = action_reconcile_decide(action_id=action.pk, operator=operator, decision=decision)
        assert (result.ok, result.code) == (False, "lookup_disagrees")
    assert _state(action) == before
    assert action_reconcile_decide(action_id=action.pk, operator=operator, decision="abandon").ok


def test_a_second_decision_on_the_same_call_is_refused(worker, e17, operator, unclear):
    action = _waiting_for_human(e17, "timeout")
    unclear["on"] = False
    assert action_reconcile_decide(action_id=action.pk, operator=operator, decision="abandon").ok
    before = _state(action)

    again = action_reconcile_decide(action_id=action.pk, operator=operator, decision="abandon")

    assert (again.ok, again.code) == (False, "not_waiting")
    assert _state(action) == before


# --- the screen -------------------------------------------------------------------------------


def _client(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def test_the_queue_shows_key_parameters_lookup_and_the_supported_decisions(
    worker, e17, operator, unclear
):
    action = _waiting_for_human(e17, "lose_receipt")
    unclear["on"] = False
    booking = Booking.objects.get()

    response = _client(operator).get(reverse("operators:queue"))

    assert response.status_code == 200
    html = response.content.decode()
    assert action.idempotency_key in html
    assert "reserve_room" in html and "E17" in html and "R7" in html
    assert booking.code in html  # the receipt the lookup found
    assert 'value="accept"' in html
    assert 'value="retry"' not in html and 'value="abandon"' not in html
    assert 'id="operators-count"' in html  # the navigation's entry, with its count


def test_an_operator_decides_from_the_screen(worker, e17, operator, unclear):
    action = _waiting_for_human(e17, "timeout")
    unclear["on"] = False
    client = _client(operator, enforce_csrf_checks=True)
    page = client.get(reverse("operators:queue"))
    token = page.cookies["csrftoken"].value

    response = client.post(
        reverse("operators:decide", args=[action.pk]),
        {"decision": "abandon", "csrfmiddlewaretoken": token},
    )

    assert response.status_code == 302
    assert AgentRun.objects.get(pk=action.run_id).status == "failed"
    assert AuditEntry.objects.get().actor == operator


def test_an_admin_may_decide_too(worker, e17, admin_user, unclear):
    action = _waiting_for_human(e17, "timeout")
    unclear["on"] = False
    response = _client(admin_user).post(
        reverse("operators:decide", args=[action.pk]), {"decision": "retry"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert 'data-outcome="retry"' in response.content.decode()
    assert wait_for_run(action.run_id).status == "succeeded"


@pytest.mark.parametrize("who", ["employee", "approver"])
def test_someone_not_an_operator_gets_403_and_writes_nothing(
    worker, e17, approver, operator, unclear, who
):
    action = _waiting_for_human(e17, "timeout")
    unclear["on"] = False
    user = {"employee": e17, "approver": approver}[who]
    client = _client(user)
    before = _state(action)

    assert client.get(reverse("operators:queue")).status_code == 403
    response = client.post(reverse("operators:decide", args=[action.pk]), {"decision": "abandon"})

    assert response.status_code == 403
    assert _state(action) == before
    assert 'id="operators-count"' not in client.get(reverse("bookings:search")).content.decode()


def test_a_decision_without_the_csrf_token_is_refused_and_writes_nothing(
    worker, e17, operator, unclear
):
    action = _waiting_for_human(e17, "timeout")
    unclear["on"] = False
    before = _state(action)

    response = _client(operator, enforce_csrf_checks=True).post(
        reverse("operators:decide", args=[action.pk]), {"decision": "abandon"}
    )

    assert response.status_code == 403
    assert _state(action) == before


def test_a_stranger_to_the_site_is_sent_to_log_in(db):
    response = Client().get(reverse("operators:queue"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_lookup_that_raised_is_asked_again_before_a_human_is(worker, e17, monkeypatch):
    """A lookup that failed (its database session ended) says nothing about the write: the call
    stays unknown for the sweeper to ask again, and goes to a human only after more than
    MAX_LOOKUP_FAILURES failures in a row."""
    spec = registry.get("reserve_room")

    def broken(key: str) -> ReceiptLookup:
        raise ConnectionError("the session was terminated")

    monkeypatch.setitem(
        registry._TOOLS, "reserve_room", dataclasses.replace(spec, lookup_receipt=broken)
    )
    run = run_start(
        user=e17,
        request_text=REQUEST,
        faults=[{"tool": "reserve_room", "kind": "lose_receipt", "calls": [1]}],
    )

    def failed_lookups() -> int:
        return TraceEvent.objects.filter(
            run=run, kind=EventKind.RECONCILE_LOOKUP, payload__detail=LOOKUP_FAILED
        ).count()

    wait_until(lambda: failed_lookups() == 1, message="the first failed lookup")
    action = Action.objects.get(run=run, tool="reserve_room")
    for failures in range(2, MAX_LOOKUP_FAILURES + 1):
        assert Action.objects.get(pk=action.pk).status == ActionStatus.UNKNOWN_OUTCOME
        action_reconcile(action.pk)  # what the sweeper sends
        assert failed_lookups() == failures
    assert Action.objects.get(pk=action.pk).status == ActionStatus.UNKNOWN_OUTCOME
    action_reconcile(action.pk)
    assert Action.objects.get(pk=action.pk).status == ActionStatus.NEEDS_HUMAN
    assert failed_lookups() == MAX_LOOKUP_FAILURES + 1
