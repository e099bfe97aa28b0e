"""Request limits of the JSON API, what a refused call keeps of its input, and a write whose tool
crashes: its key settled at once and the attempt recorded."""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.db import DataError
from django.test import Client

from accounts.services import token_issue
from agentops.models import Action, AgentRun, IdempotencyRecord, TraceEvent
from agentops.runtime import registry
from agentops.runtime.redis_client import get_redis
from bookings.models import Booking, Room
from tests.conftest import slot

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.usefixtures("rooms"),
]

START, END = slot(days=4, hour=9)


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    get_redis().flushdb()


def post(user, name: str, raw: bytes, **headers):
    return Client().post(
        f"/api/tools/{name}",
        raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token_issue(user=user)}",
        **headers,
    )


def state() -> tuple:
    return (
        Booking.objects.count(),
        dict(Room.objects.values_list("code", "schedule_version")),
        IdempotencyRecord.objects.filter(status="completed").count(),
    )


def test_a_body_over_the_cap_is_413_json_and_records_nothing(e17, settings):
    before = state()
    body = json.dumps({"cursor": "x" * (settings.API_MAX_BODY_BYTES + 10)}).encode()
    for url in ("/api/tools/list_my_bookings", "/api/runs"):
        response = Client().post(
            url,
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token_issue(user=e17)}",
        )
        assert response.status_code == 413, url
        assert response.json()["error"]["code"] == "too_large"
    assert not AgentRun.objects.exists()
    assert state() == before


def test_a_megabyte_body_is_refused_before_it_is_read(e17):
    response = post(e17, "reserve_room", b'{"room_id": "' + b"R" * 1_048_576 + b'"}')
    assert response.status_code == 413
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"cursor": ' + b"[" * 40 + b"]" * 40 + b"}", "too_deep"),
        (json.dumps({"cursor": "y" * 5000}).encode(), "string_too_long"),
        (json.dumps({"k" * 5000: 1}).encode(), "string_too_long"),
        (b"[" * 10_000 + b"]" * 10_000, "malformed_json"),
    ],
    ids=["depth", "string", "key", "10k-deep"],
)
def test_depth_and_string_length_are_capped_with_a_400(e17, raw, code):
    response = post(e17, "list_my_bookings", raw)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == code
    assert not AgentRun.objects.exists()


def test_a_refused_call_keeps_a_digest_of_its_input_not_the_input(e17):
    before = state()
    big = "<script>alert(1)</script>' OR 1=1 --" * 100  # 3.6 kB, under the string cap
    response = post(
        e17,
        "reserve_room",
        json.dumps({"room_id": big, "start_at": "nope", "extra": big}).encode(),
    )

    assert response.status_code == 200
    assert response.json()["code"] == "schema_violation"
    action = Action.objects.get()
    assert action.status == "rejected"
    kept = action.params["refused_input"]
    assert set(kept) == {"sha256", "bytes", "type", "fields"}
    assert kept["fields"] == ["room_id", "start_at", "extra"]
    assert kept["bytes"] > 7000
    stored = json.dumps([action.params, action.result]) + json.dumps(
        list(TraceEvent.objects.values_list("payload", flat=True))
    )
    assert "alert(1)" not in stored
    assert len(stored) < 4000
    assert state() == before


@pytest.fixture
def crashing_reserve(monkeypatch):
    """reserve_room raises from inside the tool, before anything commits."""
    spec = registry.get("reserve_room")

    def crash(ctx, args):
        raise DataError("integer out of range")

    monkeypatch.setitem(registry._TOOLS, "reserve_room", dataclasses.replace(spec, handler=crash))
    return spec


def reserve_body() -> bytes:
    return json.dumps(
        {
            "room_id": "R7",
            "start_at": START.isoformat(),
            "end_at": END.isoformat(),
            "attendees": 3,
            "expected_version": Room.objects.get(code="R7").schedule_version,
        }
    ).encode()


def test_a_crashed_write_settles_its_key_and_records_the_attempt(
    e17, crashing_reserve, monkeypatch
):
    before = state()
    first = post(e17, "reserve_room", reserve_body(), HTTP_IDEMPOTENCY_KEY="crash-1")

    assert first.status_code == 200
    assert (first.json()["code"], first.json()["signal"]) == ("tool_crashed", "yellow")
    assert "Nothing was written" in first.json()["message"]
    run = AgentRun.objects.get()
    assert (run.status, run.outcome) == ("failed", "call_failed")
    action = run.actions.get()
    assert (action.status, action.attempts) == ("failed", 1)
    kinds = list(run.events.order_by("seq").values_list("kind", flat=True))
    assert kinds == ["gate", "execution_started", "execution_finished", "run_finished"]
    assert not IdempotencyRecord.objects.filter(status="in_progress").exists()
    assert state() == before

    # The key was given back: the same call with the same key runs now, not `in_progress`.
    monkeypatch.setitem(registry._TOOLS, "reserve_room", crashing_reserve)
    again = post(e17, "reserve_room", reserve_body(), HTTP_IDEMPOTENCY_KEY="crash-1")
    assert again.json()["ok"] is True
    assert Booking.objects.count() == 1


def test_a_write_that_committed_before_crashing_answers_its_receipt(e17, monkeypatch):
    spec = registry.get("reserve_room")

    def commit_then_crash(ctx, args):
        spec.handler(ctx, args)
        raise KeyError("bug after the commit")

    monkeypatch.setitem(
        registry._TOOLS, "reserve_room", dataclasses.replace(spec, handler=commit_then_crash)
    )
    response = post(e17, "reserve_room", reserve_body(), HTTP_IDEMPOTENCY_KEY="crash-2")

    assert response.json()["ok"] is True
    booking = Booking.objects.get()
    assert response.json()["data"]["booking_id"] == booking.code
    assert IdempotencyRecord.objects.get().status == "completed"
    assert AgentRun.objects.get().status == "succeeded"


def test_a_crashing_read_is_a_transient_failure_not_a_500(e17, monkeypatch):
    spec = registry.get("list_my_bookings")

    def crash(ctx, args):
        raise RuntimeError("bug")

    monkeypatch.setitem(
        registry._TOOLS, "list_my_bookings", dataclasses.replace(spec, handler=crash)
    )
    response = post(e17, "list_my_bookings", b"{}")
    assert response.status_code == 200
    assert (response.json()["code"], response.json()["signal"]) == ("tool_crashed", "yellow")
    assert "RuntimeError" in response.json()["message"] and "bug" not in response.json()["message"]


def test_a_version_beyond_the_column_is_refused_not_a_500(e17):
    body = json.loads(reserve_body()) | {"expected_version": 10**30}
    response = post(e17, "reserve_room", json.dumps(body).encode())
    assert response.status_code == 200
    assert response.json()["code"] == "schema_violation"


def test_a_failure_before_the_call_is_recorded_is_answered_and_recorded(e17, monkeypatch):
    """A bug in the runtime's own bookkeeping (here: the gate) rolls the call's records back;
    the attempt is still answered with JSON and recorded as a failed run, input as a digest."""
    from agentops.runtime import gate

    def broken(*args, **kwargs):
        raise RuntimeError("bug in the gate")

    monkeypatch.setattr(gate, "screen", broken)
    before = state()
    response = post(e17, "reserve_room", reserve_body(), HTTP_IDEMPOTENCY_KEY="gate-bug")

    assert response.status_code == 200
    assert (response.json()["code"], response.json()["signal"]) == ("internal_error", "yellow")
    assert "bug in the gate" not in response.text
    run = AgentRun.objects.get()
    assert (run.status, run.outcome) == ("failed", "call_failed")
    gate_event, finished = run.events.order_by("seq")
    assert gate_event.payload["refusal"]["code"] == "internal_error"
    assert gate_event.payload["refused_input"]["fields"][0] == "room_id"
    assert finished.kind == "run_finished"
    assert not Action.objects.exists()
    assert not IdempotencyRecord.objects.exists()
    assert state() == before


# --- odd content types, boundaries and headers on the session paths -------------------------------

CSRF = "c" * 32  # an unmasked secret: the cookie and the header carry the same one


def session_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.cookies["csrftoken"] = CSRF
    return client


ODD_BODIES = [
    ("multipart-bad-boundary", "multipart/form-data; boundary=", b"--x\r\n\r\n"),
    ("multipart-no-boundary", "multipart/form-data", b'{"limit": 1}'),
    (
        "multipart-wrong-boundary",
        "multipart/form-data; boundary=abc",
        b'--zzz\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--zzz--\r\n',
    ),
    (
        "multipart-valid-form",
        "multipart/form-data; boundary=abc",
        b'--abc\r\nContent-Disposition: form-data; name="limit"\r\n\r\n1\r\n--abc--\r\n',
    ),
    ("multipart-huge-boundary", "multipart/form-data; boundary=" + "b" * 5000, b"--b\r\n"),
    ("multipart-nul-boundary", "multipart/form-data; boundary=a\x00b", b"--a\x00b--\r\n"),
    ("urlencoded", "application/x-www-form-urlencoded", b"limit=1&csrfmiddlewaretoken=x"),
    ("urlencoded-bad-percent", "application/x-www-form-urlencoded", b"a=%zz&%%=%"),
    ("text-plain", "text/plain", b'{"limit": 1}'),
    ("no-content-type", "", b'{"limit": 1}'),
    ("json-latin1-charset", "application/json; charset=latin-1", b'{"limit": 1}'),
    ("json-unknown-charset", "application/json; charset=nope-9", b'{"limit": 1}'),
    ("json-utf16", "application/json; charset=utf-16", '{"limit": 1}'.encode("utf-16")),
    ("garbage-type", ";;;=;", b"\x00\xff\xfe"),
    ("octet-stream", "application/octet-stream", bytes(range(256))),
]


@pytest.mark.parametrize(
    ("content_type", "raw"), [b[1:] for b in ODD_BODIES], ids=[b[0] for b in ODD_BODIES]
)
@pytest.mark.parametrize(
    "path", ["/api/tools/list_my_bookings", "/api/tools/reserve_room", "/api/runs"]
)
def test_odd_content_types_on_the_session_path_are_4xx_json_and_write_nothing(
    e17, path, content_type, raw
):
    before = state()
    response = session_client(e17).generic(
        "POST", path, raw, content_type=content_type, HTTP_X_CSRFTOKEN=CSRF
    )
    assert response.status_code < 500
    assert response["Content-Type"].startswith("application/json")
    if content_type.split(";")[0] in ("multipart/form-data", "application/x-www-form-urlencoded"):
        assert response.status_code == 415
    if response.status_code >= 400:
        assert "error" in response.json()
    assert state() == before


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_CONTENT_LENGTH": "-1"},
        {"CONTENT_LENGTH": "abc"},
        {"CONTENT_LENGTH": "99999999999999999999"},
        {"HTTP_TRANSFER_ENCODING": "chunked"},
        {"HTTP_CONTENT_ENCODING": "gzip"},
        {"HTTP_X_CSRFTOKEN": "\x00" * 32},
        {"HTTP_X_CSRFTOKEN": "é" * 64},
        {"HTTP_ORIGIN": "null"},
        {"HTTP_HOST": "evil.example"},
        {"HTTP_IDEMPOTENCY_KEY": ""},
        {"HTTP_ACCEPT_LANGUAGE": "zz-" + "x" * 4000},
    ],
    ids=lambda h: next(iter(h)),
)
def test_odd_headers_on_the_session_path_are_never_a_5xx(e17, headers):
    before = state()
    meta = {"HTTP_X_CSRFTOKEN": CSRF} | headers
    response = session_client(e17).post(
        "/api/tools/list_my_bookings", b"{}", content_type="application/json", **meta
    )
    assert response.status_code < 500
    assert state() == before


def test_a_multipart_body_to_a_tool_is_415_and_writes_nothing(e17):
    before = state()
    response = session_client(e17).generic(
        "POST",
        "/api/tools/reserve_room",
        b"--x\r\n\r\n",
        content_type="multipart/form-data; boundary=",
        HTTP_X_CSRFTOKEN=CSRF,
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"
    assert not AgentRun.objects.exists()
    assert state() == before


def test_a_rate_limited_call_answers_429_with_retry_after_and_writes_nothing(e17, settings):
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 1
    first = post(e17, "list_my_bookings", b"{}")
    before = state()
    limited = post(e17, "reserve_room", reserve_body(), HTTP_IDEMPOTENCY_KEY="limited")

    assert first.status_code == 200
    assert limited.status_code == 429
    envelope = limited.json()
    assert (envelope["code"], envelope["signal"]) == ("rate_limited", "yellow")
    assert 0 < envelope["retry_after_ms"] <= 60_000
    assert int(limited["Retry-After"]) == -(-envelope["retry_after_ms"] // 1000)
    assert state() == before


def test_a_limiter_that_does_not_answer_is_503_with_retry_after(e17, monkeypatch):
    from agentops.runtime import ratelimit

    def down(subject_id):
        raise ratelimit.LimiterUnavailableError

    monkeypatch.setattr(ratelimit.tool_calls, "hit", down)
    before = state()
    response = post(e17, "reserve_room", reserve_body())
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response.json()["code"] == "rate_limiter_unavailable"
    assert state() == before
