"""Redis does not answer (a restart, a stall): the JSON API refuses for now with a transient,
retryable answer, never a server error, and nothing is written but the refusal's records."""

from __future__ import annotations

import pytest
from django.test import Client
from redis import Redis

from accounts.services import token_issue
from agentops.runtime import ratelimit
from bookings.models import Booking, Room
from config.devservers import free_port
from tests.conftest import slot

pytestmark = [pytest.mark.chaos, pytest.mark.django_db, pytest.mark.usefixtures("rooms")]


@pytest.fixture
def redis_down(monkeypatch):
    dead = Redis(port=free_port(), socket_timeout=0.5, socket_connect_timeout=0.5)
    monkeypatch.setattr(ratelimit, "get_redis", lambda: dead)
    monkeypatch.setattr(ratelimit, "UNAVAILABLE_RETRY_DELAYS_S", (0.01,))


def test_an_outage_shorter_than_the_pauses_is_ridden_out(monkeypatch, e17):
    """The count is asked again after each pause: Redis back on the second try, nothing refused."""
    from agentops.runtime.redis_client import get_redis

    dead = Redis(port=free_port(), socket_timeout=0.5, socket_connect_timeout=0.5)
    answers = iter([dead, get_redis()])
    monkeypatch.setattr(ratelimit, "get_redis", lambda: next(answers))
    monkeypatch.setattr(ratelimit, "UNAVAILABLE_RETRY_DELAYS_S", (0.01, 0.01))
    assert ratelimit.tool_calls.hit(e17.pk) is None


def test_a_connection_closed_under_the_count_is_asked_again(monkeypatch, e17):
    """redis-py's race: another thread closes the connection this one reads (its parser's
    buffer is gone, AttributeError). The count is asked again on a new connection."""
    from agentops.runtime.redis_client import get_redis

    real = get_redis()
    calls = []

    class ClosedUnderfoot:
        def pipeline(self, transaction=False):
            calls.append(transaction)
            if len(calls) == 1:
                broken = real.pipeline(transaction=transaction)

                def execute():
                    raise AttributeError("'NoneType' object has no attribute 'readline'")

                broken.execute = execute
                return broken
            return real.pipeline(transaction=transaction)

    monkeypatch.setattr(ratelimit, "get_redis", ClosedUnderfoot)
    monkeypatch.setattr(ratelimit, "UNAVAILABLE_RETRY_DELAYS_S", (0.01,))
    assert ratelimit.tool_calls.hit(e17.pk) is None
    assert len(calls) == 2


def test_a_tool_call_is_refused_for_now_not_failed(redis_down, e17):
    start, end = slot(days=5)
    versions = list(Room.objects.order_by("code").values_list("schedule_version", flat=True))
    response = Client().post(
        "/api/tools/reserve_room",
        {
            "room_id": "R7",
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "expected_version": Room.objects.get(code="R7").schedule_version,
        },
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token_issue(user=e17)}",
    )
    assert (response.status_code, response["Retry-After"]) == (503, "1")  # "not now", as HTTP says
    body = response.json()
    assert (body["ok"], body["signal"], body["code"]) == (
        False,
        "yellow",
        "rate_limiter_unavailable",
    )
    assert body["retry_after_ms"] == 1000
    assert Booking.objects.count() == 0
    assert (
        list(Room.objects.order_by("code").values_list("schedule_version", flat=True)) == versions
    )


def test_starting_a_run_answers_503_with_retry_after(redis_down, e17):
    response = Client().post(
        "/api/runs",
        {"request": "book a room tomorrow 14:00-15:00 for 3 people"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token_issue(user=e17)}",
    )
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response.json()["error"]["code"] == "unavailable"
