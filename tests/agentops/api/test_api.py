"""The JSON API: who may call it, what a governed direct call answers and writes, and runs."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import ApiToken
from accounts.selectors import user_roles
from accounts.services import token_issue
from agentops.contract import exports
from agentops.models import AgentRun, IdempotencyRecord, TraceEvent
from agentops.runtime import registry
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.redis_client import get_redis
from agentops.runtime.trace import event_json
from bookings.models import Booking, Room
from tests.conftest import slot
from tests.workers import wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.usefixtures("rooms"),
]

TOOLS = reverse("agentops:api-tools")
RUNS = reverse("agentops:api-runs")
START, END = slot(days=2, hour=14)
JOIN_TIMEOUT = 60


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    get_redis().flushdb()  # per-user call counters of earlier tests


def call_url(name: str) -> str:
    return reverse("agentops:api-tool-call", args=[name])


def run_url(run_id: Any) -> str:
    return reverse("agentops:api-run", args=[run_id])


def bearer(user) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token_issue(user=user)}"}


def session(user, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def post_json(client: Client, url: str, body: Any, **headers: Any):
    data = body if isinstance(body, bytes) else json.dumps(body)
    return client.post(url, data=data, content_type="application/json", **headers)


def find_body(attendees: int = 3, equipment: tuple[str, ...] = ("projector",)) -> dict[str, Any]:
    return {
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": attendees,
        "equipment": list(equipment),
    }


def reserve_body(room: str = "R7", **changes: Any) -> dict[str, Any]:
    body = {
        "room_id": room,
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": 3,
        "equipment": ["projector"],
        "expected_version": Room.objects.get(code=room).schedule_version,
    }
    return body | changes


def nothing_booked() -> bool:
    return not Booking.objects.exists() and not IdempotencyRecord.objects.exists()


# --- listing tools and authentication -------------------------------------------------------------


def test_listing_tools_with_a_session_shows_the_visible_tools_described(e17):
    response = session(e17).get(TOOLS)

    assert response.status_code == 200
    tools = response.json()["tools"]
    assert tools == [exports.describe(s) for s in registry.visible_to(user_roles(user=e17))]
    assert {
        "find_available_rooms",
        "reserve_room",
        "cancel_booking",
        "get_booking",
        "list_my_bookings",
    } <= {t["name"] for t in tools}
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema", "output_schema", "metadata"}
        assert tool["input_schema"]["additionalProperties"] is False
        assert tool["metadata"]["roles"]


def test_listing_tools_with_a_bearer_token_shows_the_same_tools(e17):
    response = Client().get(TOOLS, **bearer(e17))

    assert response.status_code == 200
    assert response.json() == session(e17).get(TOOLS).json()


def test_a_user_without_any_group_sees_no_tools(django_user_model):
    nobody = django_user_model.objects.create_user(username="nogroup", employee_id="E99")

    assert session(nobody).get(TOOLS).json() == {"tools": []}
    assert Client().get(TOOLS, **bearer(nobody)).json() == {"tools": []}


def test_a_user_without_any_group_cannot_call_a_tool(django_user_model):
    nobody = django_user_model.objects.create_user(username="nogroup", employee_id="E99")

    response = post_json(Client(), call_url("find_available_rooms"), find_body(), **bearer(nobody))

    assert response.status_code == 200
    assert (response.json()["reason"], response.json()["code"]) == ("forbidden", "tool_not_visible")


def test_no_credentials_is_401():
    listing = Client().get(TOOLS)
    call = post_json(Client(), call_url("find_available_rooms"), find_body())
    run = post_json(Client(), RUNS, {"request": "book a room"})

    assert [r.status_code for r in (listing, call, run)] == [401, 401, 401]
    assert listing.json()["error"]["code"] == "not_authenticated"
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize("header", ["Bearer ak_not-a-real-token", "Bearer ", "Bearer"])
def test_an_unknown_bearer_token_is_401(e17, header):
    response = Client().get(TOOLS, HTTP_AUTHORIZATION=header)

    assert response.status_code == 401


def test_a_revoked_token_is_401_and_calls_nothing(e17):
    headers = bearer(e17)
    assert Client().get(TOOLS, **headers).status_code == 200
    ApiToken.objects.update(revoked_at=timezone.now())

    listing = Client().get(TOOLS, **headers)
    call = post_json(Client(), call_url("reserve_room"), reserve_body(), **headers)

    assert listing.status_code == call.status_code == 401
    assert listing.json()["error"]["code"] == "invalid_token"
    assert not AgentRun.objects.exists()
    assert nothing_booked()


def test_the_token_of_a_deactivated_user_is_401(e17):
    headers = bearer(e17)
    e17.is_active = False
    e17.save(update_fields=["is_active"])

    assert Client().get(TOOLS, **headers).status_code == 401


def test_a_bad_token_is_refused_even_with_a_valid_session(e17):
    response = session(e17).get(TOOLS, HTTP_AUTHORIZATION="Bearer ak_wrong")

    assert response.status_code == 401


# --- calling a tool -------------------------------------------------------------------------------


def test_finding_rooms_returns_a_green_envelope_smallest_fitting_rooms_first(e17):
    response = post_json(Client(), call_url("find_available_rooms"), find_body(), **bearer(e17))

    assert response.status_code == 200
    envelope = response.json()
    assert (envelope["ok"], envelope["signal"]) == (True, "green")
    rooms = envelope["data"]["rooms"]
    assert [r["room_id"] for r in rooms[:2]] == ["R7", "R9"]
    assert all(r["capacity"] >= 3 and "projector" in r["equipment"] for r in rooms)
    assert rooms[0]["version"] == Room.objects.get(code="R7").schedule_version
    assert envelope["observed_at"]


def test_a_direct_call_leaves_a_one_action_run_with_four_events_in_order(e17):
    response = post_json(Client(), call_url("find_available_rooms"), find_body(), **bearer(e17))

    run = AgentRun.objects.get()
    assert (run.model_name, run.subject, run.status) == ("direct", e17, "succeeded")
    assert list(run.events.order_by("seq").values_list("seq", "kind")) == [
        (1, "gate"),
        (2, "execution_started"),
        (3, "execution_finished"),
        (4, "run_finished"),
    ]
    action = run.actions.get()
    assert (action.tool, action.status, action.result) == (
        "find_available_rooms",
        "succeeded",
        response.json(),
    )
    assert run.events.get(kind="execution_finished").payload["result"] == response.json()


def test_an_unknown_tool_is_404_and_writes_nothing(e17):
    response = post_json(Client(), call_url("manage_rooms"), {}, **bearer(e17))

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_tool"
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize(
    "body", [b"{not json", b'{"room_id": "R7",', b"\xff\xfe", b"'single quotes'"]
)
def test_malformed_json_is_400_and_writes_nothing(e17, body):
    response = post_json(Client(), call_url("reserve_room"), body, **bearer(e17))

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"
    assert not AgentRun.objects.exists()
    assert nothing_booked()


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        ({"requester": "e23"}, "schema_violation", "requester"),
        ({"attendees": "3"}, "schema_violation", "attendees"),
        ({"start_at": START.replace(tzinfo=None).isoformat()}, "schema_violation", "start_at"),
        ({"room_id": "R7; DROP TABLE"}, "schema_violation", "room_id"),
        ({"approval_token": "approved-by-a01"}, "approval_field_refused", "approval_token"),
    ],
    ids=["extra_field", "string_attendees", "naive_datetime", "bad_room_code", "smuggled_approval"],
)
def test_arguments_that_break_the_schema_are_a_red_invalid_input_and_book_nothing(
    e17, change, code, field
):
    response = post_json(Client(), call_url("reserve_room"), reserve_body(**change), **bearer(e17))

    assert response.status_code == 200
    envelope = response.json()
    assert (envelope["ok"], envelope["signal"], envelope["reason"]) == (
        False,
        "red",
        "invalid_input",
    )
    assert envelope["code"] == code
    assert field in envelope["message"]
    assert envelope["hint"]
    assert nothing_booked()
    run = AgentRun.objects.get()  # the refusal's own trace, and nothing else
    assert (run.status, run.outcome) == ("failed", "refused")
    assert [e.kind for e in run.events.order_by("seq")] == ["gate", "run_finished"]
    assert run.events.get(kind="gate").payload["refusal"] == envelope


def test_a_json_value_that_is_not_an_object_is_a_red_invalid_input(e17):
    response = post_json(Client(), call_url("reserve_room"), [1, 2], **bearer(e17))

    assert (response.json()["reason"], response.json()["code"]) == (
        "invalid_input",
        "arguments_not_object",
    )
    assert nothing_booked()


def test_a_reservation_is_made_for_the_caller_of_the_token(e23):
    body = reserve_body("R12", equipment=["whiteboard"])

    response = post_json(Client(), call_url("reserve_room"), body, **bearer(e23))

    data = response.json()["data"]
    assert data["status"] == "confirmed"
    booking = Booking.objects.get()
    assert (booking.code, booking.requester, booking.room.code) == (data["booking_id"], e23, "R12")


def test_a_premium_room_through_the_api_waits_for_approval_and_writes_nothing(e17):
    body = reserve_body("R16")

    response = post_json(
        Client(), call_url("reserve_room"), body, HTTP_IDEMPOTENCY_KEY="p1", **bearer(e17)
    )

    assert response.status_code == 202
    envelope = response.json()
    assert (envelope["signal"], envelope["reason"], envelope["code"]) == (
        "yellow",
        "in_progress",
        "approval_pending",
    )
    assert "R16 is a premium room" in envelope["message"]
    run = AgentRun.objects.get()
    assert envelope["pending"]["run_id"] == str(run.pk)
    assert envelope["pending"]["poll"] == f"/api/runs/{run.pk}"
    assert run.status == "waiting_approval"
    assert nothing_booked()
    assert Room.objects.get(code="R16").schedule_version == body["expected_version"]
    event = TraceEvent.objects.get(kind="gate")
    assert (event.payload["check"], event.payload["decision"]) == ("policy", "approval")
    from approvals.models import ApprovalRequest

    assert ApprovalRequest.objects.get().action_ref == envelope["pending"]["action_id"]

    # The same request retried with its key answers the same pending state, asking nobody twice.
    again = post_json(
        Client(), call_url("reserve_room"), body, HTTP_IDEMPOTENCY_KEY="p1", **bearer(e17)
    )
    assert again.status_code == 202
    assert again.json()["pending"] == envelope["pending"]
    assert AgentRun.objects.count() == ApprovalRequest.objects.count() == 1
    other = post_json(
        Client(),
        call_url("reserve_room"),
        reserve_body("R16", attendees=4),
        HTTP_IDEMPOTENCY_KEY="p1",
        **bearer(e17),
    )
    assert other.json()["reason"] == "idempotency_key_reuse"


def test_a_room_of_another_department_through_the_api_waits_for_approval(e17):
    response = post_json(Client(), call_url("reserve_room"), reserve_body("R15"), **bearer(e17))

    assert response.json()["code"] == "approval_pending"
    assert nothing_booked()


# --- Idempotency-Key ------------------------------------------------------------------------------


def test_the_same_key_and_body_twice_answers_identically_and_books_once(e17):
    headers = bearer(e17) | {"HTTP_IDEMPOTENCY_KEY": "k-1"}
    body = reserve_body()

    first = post_json(Client(), call_url("reserve_room"), body, **headers)
    second = post_json(Client(), call_url("reserve_room"), body, **headers)

    assert first.json()["data"]["status"] == "confirmed"
    assert second.json() == first.json()
    assert Booking.objects.count() == 1
    assert Booking.objects.get().code == first.json()["data"]["booking_id"]


def test_the_same_key_with_another_body_is_refused_as_key_reuse(e17):
    headers = bearer(e17) | {"HTTP_IDEMPOTENCY_KEY": "k-1"}
    body = reserve_body()
    first = post_json(Client(), call_url("reserve_room"), body, **headers)

    other = post_json(Client(), call_url("reserve_room"), body | {"room_id": "R9"}, **headers)

    assert first.json()["ok"] is True
    envelope = other.json()
    assert (envelope["signal"], envelope["reason"]) == ("red", "idempotency_key_reuse")
    assert envelope["hint"]
    assert list(Booking.objects.values_list("room__code", flat=True)) == ["R7"]


def test_a_key_belongs_to_its_caller_so_another_user_with_it_books_separately(e17, e23):
    first = post_json(
        Client(),
        call_url("reserve_room"),
        reserve_body(),
        **bearer(e17),
        HTTP_IDEMPOTENCY_KEY="shared",
    )
    other = post_json(
        Client(),
        call_url("reserve_room"),
        reserve_body("R15"),
        **bearer(e23),
        HTTP_IDEMPOTENCY_KEY="shared",
    )

    assert first.json()["data"]["status"] == other.json()["data"]["status"] == "confirmed"
    assert sorted(Booking.objects.values_list("requester__username", "room__code")) == [
        ("e17", "R7"),
        ("e23", "R15"),
    ]


def test_without_a_key_each_call_is_a_new_request(e17):
    headers = bearer(e17)
    body = reserve_body()

    first = post_json(Client(), call_url("reserve_room"), body, **headers)
    second = post_json(Client(), call_url("reserve_room"), body, **headers)

    assert first.json()["data"]["status"] == "confirmed"
    assert (second.json()["signal"], second.json()["reason"]) == ("red", "conflict")
    assert Booking.objects.count() == 1
    keys = list(AgentRun.objects.values_list("actions__idempotency_key", flat=True))
    assert len(set(keys)) == 2
    assert all(k.startswith(f"api:{e17.pk}:") for k in keys)


def test_an_overlong_idempotency_key_is_refused_clearly_and_writes_nothing(e17):
    client = Client(raise_request_exception=False)

    response = post_json(
        client,
        call_url("reserve_room"),
        reserve_body(),
        **bearer(e17),
        HTTP_IDEMPOTENCY_KEY="k" * 300,
    )

    assert response.status_code in (200, 400)
    assert response.status_code == 400 or response.json()["reason"] == "invalid_input"
    assert nothing_booked()


def test_concurrent_duplicates_book_once_and_the_others_wait_or_replay(e17):
    headers = bearer(e17) | {"HTTP_IDEMPOTENCY_KEY": "race-1"}
    body = json.dumps(reserve_body())
    count = 8
    barrier = threading.Barrier(count)
    outcomes: list[Any] = [None] * count

    def racer(i: int) -> None:
        try:
            client = Client()
            connection.ensure_connection()
            barrier.wait(timeout=JOIN_TIMEOUT)
            response = client.post(
                call_url("reserve_room"), data=body, content_type="application/json", **headers
            )
            outcomes[i] = (response.status_code, response.json())
        except BaseException as exc:  # the test inspects every outcome
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)

    assert not any(t.is_alive() for t in threads)
    assert all(isinstance(o, tuple) and o[0] == 200 for o in outcomes), outcomes
    envelopes = [o[1] for o in outcomes]
    greens = [e for e in envelopes if e["signal"] == "green"]
    waits = [e for e in envelopes if e["signal"] == "yellow" and e["reason"] == "in_progress"]
    assert len(greens) + len(waits) == count, envelopes
    assert greens
    booking = Booking.objects.get()
    assert all(e == greens[0] for e in greens)
    assert greens[0]["data"]["booking_id"] == booking.code
    assert all(e["retry_after_ms"] and e["hint"] for e in waits)


# --- CSRF -----------------------------------------------------------------------------------------


def test_a_session_post_without_a_csrf_token_is_403_and_writes_nothing(e17):
    client = session(e17, enforce_csrf_checks=True)

    call = post_json(client, call_url("reserve_room"), reserve_body())
    run = post_json(client, RUNS, {"request": "book a room tomorrow 14:00-15:00 for 3 people"})

    assert call.status_code == run.status_code == 403
    assert call.json()["error"]["code"] == "csrf_failed"
    assert not AgentRun.objects.exists()
    assert nothing_booked()


def test_a_session_post_with_its_csrf_token_is_accepted(e17):
    client = session(e17, enforce_csrf_checks=True)
    secret = "a" * 32
    client.cookies["csrftoken"] = secret

    response = post_json(
        client, call_url("find_available_rooms"), find_body(), HTTP_X_CSRFTOKEN=secret
    )

    assert response.status_code == 200
    assert response.json()["ok"] is True


def test_a_bearer_token_post_needs_no_csrf_token(e17):
    client = Client(enforce_csrf_checks=True)

    response = post_json(client, call_url("reserve_room"), reserve_body(), **bearer(e17))

    assert response.status_code == 200
    assert response.json()["data"]["status"] == "confirmed"
    assert Booking.objects.count() == 1


# --- runs -----------------------------------------------------------------------------------------


def test_starting_a_run_answers_202_with_its_id_and_status(e17):
    response = post_json(Client(), RUNS, {"request": "hello, what can you do?"}, **bearer(e17))

    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"run_id", "status", "conversation_id"}
    assert body["status"] == "running"
    run = AgentRun.objects.get(pk=body["run_id"])
    assert (run.subject, run.goal) == (e17, "hello, what can you do?")
    assert run.events.filter(kind="run_started").exists()


@pytest.mark.parametrize(
    "body",
    [
        {"request": "book a room", "user": "e23"},
        {"request": "book a room", "model": "scripted"},
        {"request": 42},
        {"request": ["book a room"]},
        {"text": "book a room"},
        {},
        ["book a room"],
        "book a room",
    ],
    ids=[
        "extra_user",
        "extra_model",
        "number",
        "list",
        "wrong_key",
        "empty_object",
        "array",
        "string",
    ],
)
def test_a_run_body_of_the_wrong_shape_is_400_and_starts_nothing(e17, body):
    response = post_json(Client(), RUNS, body, **bearer(e17))

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_body"
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize("text", ["", "   ", "x" * 2001])
def test_an_empty_or_overlong_request_is_400_and_starts_nothing(e17, text):
    response = post_json(Client(), RUNS, {"request": text}, **bearer(e17))

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert not AgentRun.objects.exists()


def test_the_same_run_key_and_body_twice_gives_the_first_run_again(e17):
    headers = bearer(e17) | {"HTTP_IDEMPOTENCY_KEY": "run-1"}
    first = post_json(Client(), RUNS, {"request": "hello, what can you do?"}, **headers)
    events = TraceEvent.objects.count()
    again = post_json(Client(), RUNS, {"request": "hello, what can you do?"}, **headers)

    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["run_id"] == first.json()["run_id"]
    assert AgentRun.objects.count() == 1
    assert TraceEvent.objects.count() == events


def test_the_same_run_key_with_another_request_is_refused_and_starts_nothing(e17):
    headers = bearer(e17) | {"HTTP_IDEMPOTENCY_KEY": "run-1"}
    post_json(Client(), RUNS, {"request": "hello, what can you do?"}, **headers)
    events = TraceEvent.objects.count()
    other = post_json(Client(), RUNS, {"request": "what rooms are free?"}, **headers)

    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reuse"
    assert AgentRun.objects.count() == 1
    assert TraceEvent.objects.count() == events


@pytest.mark.parametrize("key", ["k" * 101, "bad\x07key"], ids=["overlong", "unprintable"])
def test_a_malformed_run_key_is_400_and_starts_nothing(e17, key):
    headers = bearer(e17) | {"HTTP_IDEMPOTENCY_KEY": key}
    response = post_json(Client(), RUNS, {"request": "hello"}, **headers)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_idempotency_key"
    assert not AgentRun.objects.exists()


def test_a_run_key_belongs_to_its_caller(e17, e23):
    for user in (e17, e23):
        headers = bearer(user) | {"HTTP_IDEMPOTENCY_KEY": "run-1"}
        assert post_json(Client(), RUNS, {"request": "hello"}, **headers).status_code == 202
    assert AgentRun.objects.filter(idempotency_key="run-1").count() == 2


def test_concurrent_starts_under_one_key_make_one_run(e17):
    headers = bearer(e17) | {"HTTP_IDEMPOTENCY_KEY": "run-1"}
    barrier, answers = threading.Barrier(4), []

    def start() -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT)
            response = post_json(Client(), RUNS, {"request": "hello"}, **headers)
            answers.append((response.status_code, response.json()["run_id"]))
        finally:
            connection.close()

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)

    run = AgentRun.objects.get()
    assert sorted(status for status, _ in answers) == [200, 200, 200, 202]
    assert {run_id for _, run_id in answers} == {str(run.pk)}


def test_malformed_json_for_a_run_is_400_and_starts_nothing(e17):
    response = post_json(Client(), RUNS, b'{"request": ', **bearer(e17))

    assert response.status_code == 400
    assert not AgentRun.objects.exists()


def test_a_scope_the_api_refuses_is_400_and_starts_nothing(e17):
    response = post_json(
        Client(), RUNS, {"request": "book a room", "scope": {"max_writes": 99}}, **bearer(e17)
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert not AgentRun.objects.exists()


def test_a_scope_with_a_time_window_can_be_given_through_the_api(e17):
    scope = {"window": [START.isoformat(), END.isoformat()], "attendees": 3, "max_writes": 1}

    response = post_json(Client(), RUNS, {"request": "book a room", "scope": scope}, **bearer(e17))

    assert response.status_code == 202
    assert AgentRun.objects.get().delegation["window"] == scope["window"]


def test_reading_another_users_run_is_404(e17, e23):
    tool_call_governed(user=e23, name="find_available_rooms", arguments=find_body())
    theirs = AgentRun.objects.get(subject=e23)

    response = Client().get(run_url(theirs.pk), **bearer(e17))

    assert response.status_code == 404
    assert Client().get(run_url(theirs.pk), **bearer(e23)).status_code == 200


def test_reading_an_unknown_run_is_404(e17):
    assert (
        Client().get(run_url("00000000-0000-0000-0000-000000000000"), **bearer(e17)).status_code
        == 404
    )


def test_reading_own_run_shows_status_reply_ordered_events_and_bookings(e17):
    headers = bearer(e17)
    envelope = post_json(Client(), call_url("reserve_room"), reserve_body(), **headers).json()
    run = AgentRun.objects.get()

    response = Client().get(run_url(run.pk), **headers)

    assert response.status_code == 200
    body = response.json()
    assert (body["run_id"], body["status"], body["reply"]) == (str(run.pk), "succeeded", "")
    assert [(e["seq"], e["kind"]) for e in body["events"]] == [
        (1, "gate"),
        (2, "execution_started"),
        (3, "execution_finished"),
        (4, "verified"),  # the write's receipt checked against the database as it settled
        (5, "run_finished"),
    ]
    assert body["receipts"] == [{"tool": "reserve_room", "receipt": envelope["data"]}]
    assert body["receipts"][0]["receipt"]["booking_id"] == Booking.objects.get().code
    # Each event reads as the trace row says (the read is one hand-written statement).
    assert body["events"] == [event_json(e) for e in run.events.order_by("seq")]
    assert (body["created_at"], body["finished_at"], body["delegation"]) == (
        run.created_at.isoformat(),
        run.finished_at.isoformat(),
        run.delegation,
    )


def test_a_booking_request_runs_to_a_verified_booking(worker, e17):
    headers = bearer(e17)
    request = f"book a room on {START:%Y-%m-%d} 14:00-15:00 for 3 people with a projector"
    started = post_json(Client(), RUNS, {"request": request}, **headers)
    assert started.status_code == 202

    def finished() -> dict | None:
        body = Client().get(run_url(started.json()["run_id"]), **headers).json()
        return body if body["status"] in ("succeeded", "failed", "cancelled") else None

    body = wait_until(finished, timeout=30, message="the run to finish, read through the API")

    assert body["status"] == "succeeded", (body["outcome"], body["reply"])
    booking = Booking.objects.get()
    assert [r["receipt"]["booking_id"] for r in body["receipts"]] == [booking.code]
    assert (booking.room.code, booking.requester, booking.attendees) == ("R7", e17, 3)
    assert booking.code in body["reply"]
    seqs = [e["seq"] for e in body["events"]]
    assert seqs == sorted(seqs) == list(range(1, len(seqs) + 1))
    assert body["events"][-1]["kind"] == "run_finished"


@pytest.mark.parametrize(
    "raw",
    [
        b"NaN",
        b'{"limit": NaN}',
        b'{"limit": Infinity}',
        b'{"limit": 1e999}',
        b'{"cursor": "a\\u0000b"}',
        b'{"a\\u0000": 1}',
        b'{"cursor": "\\ud800"}',
        b"[" * 10_000 + b"]" * 10_000,
        b"\xff\xfe",
    ],
    ids=[
        "nan",
        "nan_inside",
        "infinity",
        "overflow",
        "nul_value",
        "nul_key",
        "lone_surrogate",
        "deep",
        "bad_utf8",
    ],
)
def test_bodies_jsonb_cannot_hold_are_a_400_and_write_nothing(e17, raw):
    runs, actions = AgentRun.objects.count(), TraceEvent.objects.count()
    for url in (call_url("list_my_bookings"), "/api/runs"):
        response = Client().post(url, raw, content_type="application/json", **bearer(e17))
        assert response.status_code == 400, url
        assert response.json()["error"]["code"] == "malformed_json"
    assert AgentRun.objects.count() == runs
    assert TraceEvent.objects.count() == actions


@pytest.mark.parametrize(
    ("method", "url", "status", "code"),
    [
        ("get", "/api/runs/00000000-0000-0000-0000-000000000000", 404, "not_found"),
        ("get", "/api/runs/not-a-uuid", 404, "not_found"),
        ("get", "/api/nothing-here", 404, "not_found"),
        ("get", "/api/tools/find_available_rooms", 405, "method_not_allowed"),
        ("delete", "/api/runs", 405, "method_not_allowed"),
        ("put", "/api/tools", 405, "method_not_allowed"),
    ],
)
def test_everything_under_api_answers_json(e17, method, url, status, code):
    response = getattr(Client(), method)(url, **bearer(e17))
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == code
    if status == 405:
        assert response["Allow"]


def test_an_error_inside_an_api_view_is_a_json_500_without_details(e17, monkeypatch):
    from agentops.api import views

    def explode(**kwargs):
        raise RuntimeError("secret detail")

    monkeypatch.setattr(views, "run_as_json", explode)
    run = AgentRun.objects.create(
        subject=e17, goal="x", model_name="rules", policy_version="p", deadline="2030-01-01T00:00Z"
    )
    client = Client(raise_request_exception=False)
    response = client.get(f"/api/runs/{run.pk}", **bearer(e17))
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "server_error"
    assert "secret" not in response.text


def test_debug_pages_are_off_by_default():
    """Settings read in a fresh process with DEBUG unset (pytest forces DEBUG off itself)."""
    import os
    import subprocess
    import sys

    from django.conf import settings

    env = {k: v for k, v in os.environ.items() if k != "DEBUG"}
    env |= {"DATABASE_URL": "postgres://unused/x", "REDIS_URL": settings.REDIS_URL}
    probe = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=env | {"DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
