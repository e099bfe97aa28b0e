"""The approval record and its verification at execution: signatures under key ids, binding,
expiry and the one-time nonce. Each refusal leaves the record as evidence, writes an audit row,
and consumes nothing."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import ApprovalAudit, ApprovalRecord, ApprovalRequest, NonceUse
from approvals.services import approval_decide, approval_verify_and_consume, nonce_consume

pytestmark = pytest.mark.django_db

BINDING = {
    "run": "r1",
    "action": "a1",
    "policy_version": "p1",
    "idempotency_key": "r1:1:0",
    "intent_digest": "d" * 64,
    "environment_version": 7,
    "environment_instance": "i1",
    "tool_generation": "g1",
    "proposal_expiry": "2030-01-01T00:00:00+00:00",
}


def pending_request(requester, action_ref: str) -> ApprovalRequest:
    return ApprovalRequest.objects.create(
        action_ref=action_ref,
        run_ref="r1",
        requester=requester,
        binding=BINDING,
        intent={"tool": "reserve_room"},
        deadline=timezone.now() + timedelta(minutes=30),
    )


@pytest.fixture
def decided(e17, approver):
    request = pending_request(e17, "a1")
    assert approval_decide(request_id=request.pk, approver=approver, approve=True, reason="ok").ok
    return request


def verify(binding=BINDING, action_ref="a1"):
    return approval_verify_and_consume(action_ref=action_ref, binding_now=binding)


def test_a_valid_approval_is_consumed_once_and_the_same_action_may_retry(decided):
    assert verify().ok
    assert verify().ok  # the same action's retry
    assert NonceUse.objects.count() == 1


def test_a_forged_signature_is_refused(decided):
    ApprovalRecord.objects.filter(request=decided).update(signature="0" * 64)
    result = verify()
    assert (result.ok, result.code) == (False, "bad_signature")
    assert not NonceUse.objects.exists()
    assert ApprovalAudit.objects.filter(event="not_valid", code="bad_signature").exists()


def test_an_unknown_key_id_is_refused(decided):
    ApprovalRecord.objects.filter(request=decided).update(key_id="k9")
    assert verify().code == "unknown_key"


def test_rotation_keeps_old_key_ids_verifiable(decided, settings):
    settings.APPROVAL_SIGNING_KEYS = "k2:new-key,k1:dev-only-approval-key"
    assert verify().ok


def test_a_tampered_payload_is_refused(decided):
    record = ApprovalRecord.objects.get(request=decided)
    record.payload["expires_at"] = (timezone.now() + timedelta(days=30)).isoformat()
    record.save()
    assert verify().code == "bad_signature"


@pytest.mark.parametrize(
    "change",
    [
        {"intent_digest": "e" * 64},  # parameters A approved, parameters B executed
        {"environment_version": 8},  # the room changed
        {"environment_instance": "other-db"},
        {"tool_generation": "g2"},
        {"policy_version": "p2"},
        {"action": "a2"},
    ],
    ids=["other_params", "state_changed", "other_instance", "tool_redeclared", "policy", "action"],
)
def test_an_approval_of_one_binding_does_not_authorise_another(decided, change):
    result = verify(BINDING | change)
    assert (result.ok, result.code) == (False, "approval_drifted")
    assert next(iter(change)) in result.message
    assert not NonceUse.objects.exists()


def test_an_expired_approval_is_refused(decided):
    record = ApprovalRecord.objects.get(request=decided)
    past = timezone.now() - timedelta(seconds=1)
    # Re-sign as the server would have, with an expiry in the past: only time is wrong.
    from approvals import signing

    record.payload["expires_at"] = past.isoformat()
    record.key_id, record.signature = signing.sign(record.payload)
    record.save()
    assert verify().code == "approval_expired"


def test_a_nonce_used_by_another_action_is_a_replay(decided):
    NonceUse.objects.create(nonce=ApprovalRecord.objects.get().nonce, action_ref="a-other")
    assert verify().code == "nonce_replayed"


def test_no_approval_at_all_is_refused(e17):
    assert verify(action_ref="nothing").code == "approval_missing"


@pytest.mark.django_db(transaction=True)
def test_two_approvers_at_once_give_one_decision(e17):
    from tests.accounts.factories import APPROVERS, EMPLOYEES, user_create

    first = user_create("a01", roles=[EMPLOYEES, APPROVERS])
    second = user_create("a02", roles=[EMPLOYEES, APPROVERS])
    request = ApprovalRequest.objects.create(
        action_ref="a1",
        run_ref="r1",
        requester=e17,
        binding=BINDING,
        intent={},
        deadline=timezone.now() + timedelta(minutes=30),
    )
    results = {}
    barrier = threading.Barrier(2)

    def decide(user, approve):
        try:
            barrier.wait()
            results[user.username] = approval_decide(
                request_id=request.pk, approver=user, approve=approve, reason="x"
            )
        finally:
            connection.close()  # give the pooled connection back

    threads = [
        threading.Thread(target=decide, args=(first, True)),
        threading.Thread(target=decide, args=(second, False)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive()
    assert sorted(r.ok for r in results.values()) == [False, True]
    assert [r.code for r in results.values() if not r.ok] == ["already_decided"]
    assert ApprovalRecord.objects.count() == 1


def test_a_nonce_is_consumed_in_one_statement(decided):
    with CaptureQueriesContext(connection) as sql:
        assert verify().ok
    nonce_statements = [q["sql"] for q in sql.captured_queries if "approvals_nonceuse" in q["sql"]]
    assert len(nonce_statements) == 1  # a read, a savepoint, the insert and its release before
    used = NonceUse.objects.get()
    assert (used.nonce, used.action_ref) == (ApprovalRecord.objects.get().nonce, "a1")
    assert abs((timezone.now() - used.used_at).total_seconds()) < 5


@pytest.mark.django_db(transaction=True)
def test_a_nonce_consumed_by_two_actions_at_once_is_one_actions(e17):
    """The second insert waits for the first's commit, inserts nothing, and then reads the
    winner's row in a statement of its own (its snapshot, taken before that commit, cannot)."""
    inserted, answers = threading.Event(), {}

    def first() -> None:
        with transaction.atomic():
            answers["first"] = nonce_consume("n-race", "a-first")
            inserted.set()
            time.sleep(0.3)  # the second is waiting on this row meanwhile
        connection.close()

    def second() -> None:
        inserted.wait(5)
        answers["second"] = nonce_consume("n-race", "a-second")
        connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert answers == {"first": "a-first", "second": "a-first"}
    assert list(NonceUse.objects.values_list("action_ref", flat=True)) == ["a-first"]


def _columns(instance) -> tuple:
    return tuple(getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields)


def test_an_actions_latest_request_reads_what_the_queryset_read(decided, e17):
    from approvals.selectors import approval_request_latest

    later = pending_request(e17, "a1")
    seen = {}
    # a1's latest is the pending one; once that belongs to a2, a1's is the decided one.
    for ref, move in (("a1", False), ("a1", True), ("a2", True)):
        if move:
            ApprovalRequest.objects.filter(pk=later.pk).update(action_ref="a2")
        reference = (
            ApprovalRequest.objects.filter(action_ref=ref)
            .select_related("record", "record__approver")
            .order_by("-created_at")
            .first()
        )
        with CaptureQueriesContext(connection) as sql:
            found = approval_request_latest(action_ref=ref)
            record = getattr(found, "record", None)  # loaded, or known to be none
            approver = record.approver if record is not None else None
        assert len(sql.captured_queries) == 1  # the record and its approver came with it
        assert _columns(found) == _columns(reference)
        expected = getattr(reference, "record", None)
        assert (record is None) == (expected is None)
        if expected is not None:
            assert _columns(record) == _columns(expected)
            assert _columns(approver) == _columns(expected.approver)
        seen[(ref, move)] = (found.pk, record is not None)
    assert seen == {
        ("a1", False): (later.pk, False),
        ("a1", True): (decided.pk, True),
        ("a2", True): (later.pk, False),
    }
    assert approval_request_latest(action_ref="nothing") is None


def test_a_request_with_its_record_reads_what_the_queryset_read(decided, e17):
    from approvals.selectors import approval_request_with_record

    pending = pending_request(e17, "a2")
    for request in (decided, pending):
        reference = (
            ApprovalRequest.objects.select_related("requester", "record")
            .filter(pk=request.pk)
            .first()
        )
        with CaptureQueriesContext(connection) as sql:
            found = approval_request_with_record(request_id=request.pk)
            requester, record = found.requester, getattr(found, "record", None)
        assert len(sql.captured_queries) == 1  # the requester and the record came with it
        assert _columns(found) == _columns(reference)
        assert _columns(requester) == _columns(reference.requester)
        expected = getattr(reference, "record", None)
        assert (record is None) == (expected is None) == (request is pending)
        if expected is not None:
            assert _columns(record) == _columns(expected)
    assert approval_request_with_record(request_id=uuid.uuid4()) is None


def test_an_actions_approved_request_reads_what_the_queryset_read(decided, e17, approver):
    from approvals.selectors import approval_request_approved

    def reference(ref):
        return (
            ApprovalRequest.objects.filter(action_ref=ref, status="approved")
            .select_related("record")
            .order_by("-decided_at")
            .first()
        )

    # A later request of the same action, pending, then approved: the latest decision wins.
    later = pending_request(e17, "a1")
    found = []
    for step in ("pending", "approved"):
        if step == "approved":
            assert approval_decide(
                request_id=later.pk, approver=approver, approve=True, reason="ok"
            ).ok
        with CaptureQueriesContext(connection) as sql:
            got = approval_request_approved(action_ref="a1")
            record = got.record
        assert len(sql.captured_queries) == 1  # the record came with it
        want = reference("a1")
        assert _columns(got) == _columns(want) and _columns(record) == _columns(want.record)
        found.append(got.pk)
    assert found == [decided.pk, later.pk]
    assert approval_request_approved(action_ref="a2") is None and reference("a2") is None
