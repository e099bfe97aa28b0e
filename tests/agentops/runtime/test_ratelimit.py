"""Rate limits: every call counts (refused ones too), run starts have their own limit, and the
clock is injected so that no test waits for a minute to pass."""

from __future__ import annotations

import pytest

from agentops.models import Action, AgentRun
from agentops.runtime import ratelimit
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.redis_client import get_redis
from agentops.runtime.runs import RunRateLimited, run_start
from bookings.models import Booking

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock(monkeypatch):
    """A settable clock for both limiters, starting at the beginning of a window."""
    now = [1_800_000_000.0]
    for limiter in (ratelimit.tool_calls, ratelimit.run_starts):
        monkeypatch.setattr(limiter, "clock", lambda: now[0])
    get_redis().flushdb()
    return now


def test_refused_calls_count_against_the_limit(e17, settings, clock):
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 3
    for _ in range(3):
        bad = tool_call_governed(user=e17, name="find_available_rooms", arguments={"nonsense": 1})
        assert bad["reason"] == "invalid_input"
    limited = tool_call_governed(user=e17, name="find_available_rooms", arguments={"nonsense": 1})
    assert limited["reason"] == "rate_limited"
    assert limited["signal"] == "yellow"
    assert 0 < limited["retry_after_ms"] <= 60_000


def test_an_unknown_tool_counts_too(e17, settings, clock):
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 1
    assert (
        tool_call_governed(user=e17, name="no_such_tool", arguments={})["reason"] == "unknown_tool"
    )
    assert (
        tool_call_governed(user=e17, name="no_such_tool", arguments={})["reason"] == "rate_limited"
    )


def test_the_limit_is_per_user_and_per_window(e17, e23, settings, clock):
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 1
    args = {"limit": 1}
    assert tool_call_governed(user=e17, name="list_my_bookings", arguments=args)["ok"]
    assert tool_call_governed(user=e17, name="list_my_bookings", arguments=args)["reason"] == (
        "rate_limited"
    )
    assert tool_call_governed(user=e23, name="list_my_bookings", arguments=args)["ok"]
    clock[0] += 60  # the next window
    assert tool_call_governed(user=e17, name="list_my_bookings", arguments=args)["ok"]


def test_a_rate_limited_call_writes_no_booking_but_is_recorded(e17, settings, clock):
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 0
    bookings, actions = Booking.objects.count(), Action.objects.count()
    refused = tool_call_governed(user=e17, name="list_my_bookings", arguments={})
    assert refused["reason"] == "rate_limited"
    assert Booking.objects.count() == bookings
    assert Action.objects.count() == actions + 1
    assert Action.objects.latest("created_at").status == "rejected"


def test_run_starts_have_their_own_per_user_limit(e17, e23, settings, clock):
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 2
    runs = AgentRun.objects.count()
    run_start(user=e17, request_text="what are my bookings")
    run_start(user=e17, request_text="what are my bookings")
    with pytest.raises(RunRateLimited) as refused:
        run_start(user=e17, request_text="what are my bookings")
    assert 0 < refused.value.retry_after_ms <= 60_000
    assert AgentRun.objects.count() == runs + 2  # the refused start wrote nothing
    run_start(user=e23, request_text="what are my bookings")  # another user is not slowed
    clock[0] += 60
    run_start(user=e17, request_text="what are my bookings")
