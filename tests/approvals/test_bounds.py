"""Approvers cannot be flooded: one person's approval requests are bounded (waiting at once,
opened per hour), a high-risk call past a bound is refused before anything is recorded,
requested or mailed, and approvers get one mail per window listing what it brought."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.services import token_issue
from agentops.runtime.redis_client import get_redis
from approvals.models import ApprovalRequest
from approvals.services import approvers_mail_send
from bookings.models import Booking, Room
from tests.accounts.factories import APPROVERS, EMPLOYEES, user_create
from tests.conftest import ENG, reserve_room_arguments, slot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}


@pytest.fixture(autouse=True)
def _bounds(settings):
    get_redis().flushdb()  # the per-person call counters of earlier tests
    settings.APPROVAL_PENDING_PER_REQUESTER = 5
    settings.APPROVAL_REQUESTS_PER_HOUR = 20
    settings.APPROVAL_MAIL_WINDOW_SECONDS = 60


@pytest.fixture
def approvers(e17, approver):
    """Two approvers with addresses; the requester has one too (never mailed)."""
    second = user_create("a02", department=ENG, roles=[EMPLOYEES, APPROVERS])
    for user, address in ((approver, "a01@rooms.example"), (second, "a02@rooms.example")):
        user.email = address
        user.save()
    e17.email = "e17@rooms.example"
    e17.save()
    return ["a01@rooms.example", "a02@rooms.example"]


def premium_call(user, n: int):
    """A HIGH call: R16 needs an approver. Each on its own day, so none overlaps another."""
    start, end = slot(days=2 + n, hour=10)
    return Client().post(
        reverse("agentops:api-tool-call", args=["reserve_room"]),
        data=json.dumps(reserve_room_arguments("R16", start, end, 3)),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token_issue(user=user)}",
    )


def versions() -> dict[str, int]:
    return dict(Room.objects.values_list("code", "schedule_version"))


def test_eight_high_calls_in_a_row_open_five_requests_and_refuse_three(e17, approvers, mailoutbox):
    before = versions()

    answers = [premium_call(e17, n) for n in range(8)]

    assert [a.status_code for a in answers] == [202] * 5 + [429] * 3
    for refused in answers[5:]:
        envelope = refused.json()
        assert (envelope["signal"], envelope["reason"], envelope["code"]) == (
            "yellow",
            "rate_limited",
            "too_many_pending_approvals",
        )
        assert "5 requests waiting for an approver" in envelope["message"]
        assert "withdraw one" in envelope["hint"]
        assert "Retry-After" not in refused  # it depends on the approvers, not on a clock
    assert ApprovalRequest.objects.filter(requester=e17, status="pending").count() == 5
    assert ApprovalRequest.objects.count() == 5  # the refused ones asked nobody
    assert Booking.objects.count() == 0 and versions() == before
    # The first request was mailed at once; the four after it wait for the window's end.
    assert sorted(m.to[0] for m in mailoutbox) == approvers
    assert all("e17@rooms.example" not in m.to for m in mailoutbox)


def test_the_requests_of_a_window_go_out_in_one_mail_per_approver(e17, approvers, mailoutbox):
    for n in range(5):
        premium_call(e17, n)
    assert len(mailoutbox) == 2  # one per approver: the first request
    assert approvers_mail_send() == 0  # the window is not over: nothing yet

    later = timezone.now() + timedelta(seconds=61)
    assert approvers_mail_send(now=later) == 4

    batched = mailoutbox[2:]
    assert sorted(m.to[0] for m in batched) == approvers
    for mail in batched:
        assert mail.subject == "4 approvals needed"
        assert mail.body.count("asks for:") == 4
    assert approvers_mail_send(now=later + timedelta(seconds=61)) == 0  # each mailed once
    assert len(mailoutbox) == 4


def test_an_approvers_own_request_is_not_in_their_mail(approver, approvers, mailoutbox):
    premium_call(approver, 0)
    assert [m.to for m in mailoutbox] == [["a02@rooms.example"]]


def test_past_the_hours_bound_a_call_is_refused_with_retry_after(e17, approvers, settings):
    settings.APPROVAL_REQUESTS_PER_HOUR = 3
    opened = [premium_call(e17, n).status_code for n in range(3)]
    ApprovalRequest.objects.update(status="withdrawn")  # none waits: only the hour counts

    refused = premium_call(e17, 3)

    assert opened == [202, 202, 202]
    assert refused.status_code == 429
    envelope = refused.json()
    assert envelope["code"] == "too_many_approvals_this_hour"
    assert 3_500_000 < envelope["retry_after_ms"] <= 3_600_000
    assert int(refused["Retry-After"]) == -(-envelope["retry_after_ms"] // 1000)
    assert envelope["hint"] == "Ask again in 60 min."
    assert ApprovalRequest.objects.count() == 3


def test_concurrent_high_calls_of_one_person_never_pass_the_bound(e17, approvers, settings):
    settings.APPROVAL_PENDING_PER_REQUESTER = 3
    statuses: list[int] = []
    start = threading.Barrier(8)

    def call(n: int) -> None:
        try:
            start.wait(timeout=30)
            statuses.append(premium_call(e17, n).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert sorted(statuses) == [202] * 3 + [429] * 5
    assert ApprovalRequest.objects.filter(requester=e17).count() == 3


def test_the_booking_screen_says_the_bound_in_the_readers_language(e17, approvers, settings):
    settings.APPROVAL_PENDING_PER_REQUESTER = 1
    premium_call(e17, 0)
    client = Client()
    client.force_login(e17)
    start, end = slot(days=4, hour=10)

    response = client.post(
        reverse("bookings:book"),
        {
            "room": "R16",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "attendees": 3,
            "idempotency_key": str(uuid.uuid4()),
            "version": Room.objects.get(code="R16").schedule_version,
        },
        HTTP_HX_REQUEST="true",
        **ZH,
    )

    assert "您已有 1 个申请在等待审批" in response.text
    assert ApprovalRequest.objects.count() == 1
