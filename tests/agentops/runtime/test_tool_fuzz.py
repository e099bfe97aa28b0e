"""Property-based fuzzing of every tool through `POST /api/tools/<name>` (bearer tokens of five
kinds of caller, real PostgreSQL/Redis): arguments drawn from each tool's own input schema, then
mutated, plus hand-written nasties. Every payload reaches validation (the per-person limits are
lifted: tests/agentops/fuzzing.py, which counts them); never a 5xx; never a write from an
invalid call (booking rows and every room's schedule version compared before and after); every
refusal recorded in the trace, with a digest of the input rather than the input."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentops.contract import exports
from agentops.models import AgentRun
from agentops.runtime import registry
from agentops.runtime.story import trace_problems
from bookings.models import Booking, Room
from bookings.services import booking_reserve
from tests.agentops.fuzzing import fuzz_limits, fuzz_principals, tally_for
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TOOLS = sorted(s.name for s in registry.all_tools())
WRITES = {s.name for s in registry.all_tools() if not s.meta.readonly}
OFFSETS = [
    UTC,
    timezone(timedelta(hours=5, minutes=45)),
    timezone(timedelta(hours=14)),
    timezone(timedelta(hours=-12)),
    timezone(timedelta(hours=8)),
]


# --- the world before and after -------------------------------------------------------------------


def world() -> tuple:
    """Everything a write could change: the booking rows and every room's schedule version."""
    return (
        sorted(Booking.objects.values_list("code", "status", "room_id", "during")),
        sorted(Room.objects.values_list("code", "schedule_version")),
    )


def call(token: str, tool: str, body: Any, **headers: str):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Client().post(
        f"/api/tools/{tool}",
        raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        **headers,
    )


def check_answer(response, tool: str, before: tuple) -> dict | None:
    """The properties every answer has. Returns the envelope of a call that reached the runtime."""
    assert response.status_code < 500, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    answer = response.json()
    wrote = answer.get("ok") is True and tool in WRITES
    if not wrote:
        assert world() == before, (tool, answer)
    if response.status_code in (200, 202):
        check_trace(answer)
        return answer
    assert answer["error"]["code"]
    return None


def check_trace(answer: dict) -> None:
    """The call's run holds a gap-free trace whose payloads are plain JSON, and a call refused
    for its input (the schema, the tool's own rules) keeps only a digest of it; one refused for
    who sent it (visibility) keeps its validated parameters."""
    run = AgentRun.objects.order_by("-created_at").first()
    assert trace_problems(run=run) == []  # gap-free, the gate first, ends as the run
    events = list(run.events.order_by("seq").values_list("seq", "kind", "payload"))
    json.dumps([e[2] for e in events], allow_nan=False)
    action = run.actions.get()
    if action.status == "rejected":
        gate = events[0][2]
        assert gate["refusal"]["code"] == answer["code"]
        if gate["check"] == "schema":
            assert set(action.params) == {"refused_input"}
        else:
            assert "refused_input" not in action.params


@pytest.fixture
def principals(rooms, e17, e23, settings) -> dict[str, str]:
    """Bearer tokens of the callers the fuzz takes turns with, the per-person limits out of
    their way: every payload is judged (tests/agentops/fuzzing.py)."""
    fuzz_limits(settings)
    return fuzz_principals(e17=e17, e23=e23)


@pytest.fixture
def token(principals) -> str:
    return principals["e17"]


@pytest.fixture
def theirs(e23):
    """A booking of another employee (codes are sequential: easy to guess)."""
    start, end = slot(days=9, hour=11)
    return booking_reserve(
        user=e23, room_code="R9", start_at=start, end_at=end, attendees=2, idempotency_key="e23"
    ).booking


# --- strategies from the tools' own schemas ---------------------------------------------------------

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
any_json = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def moments(draw) -> str:
    """Mostly near the present (so some calls are valid), sometimes anywhere in 1..9999, with odd
    offsets, sometimes without one."""
    offset = draw(st.sampled_from(OFFSETS))
    if draw(st.integers(0, 3)):
        base = datetime.now(UTC) + timedelta(hours=draw(st.integers(-48, 24 * 120)))
        moment = base.replace(minute=0, second=0, microsecond=0).astimezone(offset)
    else:
        naive = draw(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
        moment = naive.replace(tzinfo=offset)
    text = moment.isoformat()
    return text if draw(st.integers(0, 9)) else text[: -len("+00:00")]  # naive, now and then


def from_schema(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy:
    """A strategy for the subset of JSON Schema that pydantic writes for these tools."""
    if "$ref" in schema:
        return from_schema(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    if "anyOf" in schema:
        return st.one_of([from_schema(s, defs) for s in schema["anyOf"]])
    if "enum" in schema or "const" in schema:
        return st.sampled_from(schema.get("enum") or [schema["const"]])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "string" and schema.get("format") == "date-time":
        return moments()
    if kind == "string" and "pattern" in schema:
        return st.from_regex(re.compile(schema["pattern"].replace("\\d", "[0-9]")), fullmatch=True)
    if kind == "string":
        return st.text(max_size=schema.get("maxLength", 50))
    if kind == "array":
        return st.lists(from_schema(schema["items"], defs), max_size=schema.get("maxItems", 5))
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: from_schema(v, defs) for k, v in properties.items() if k in required},
            optional={k: from_schema(v, defs) for k, v in properties.items() if k not in required},
        )
    return any_json


@st.composite
def arguments(draw, tool: str) -> Any:
    schema = exports.input_schema(registry.get(tool))
    args = draw(from_schema(schema, schema.get("$defs", {})))
    mutation = draw(st.sampled_from(["none", "none", "drop", "extra", "retype", "whole"]))
    if mutation == "drop" and args:
        args.pop(draw(st.sampled_from(sorted(args))))
    elif mutation == "extra":
        args[draw(st.text(min_size=1, max_size=20))] = draw(any_json)
    elif mutation == "retype" and args:
        args[draw(st.sampled_from(sorted(args)))] = draw(any_json)
    elif mutation == "whole":
        return draw(any_json)
    return args


EXAMPLES_PER_TOOL = 25


@pytest.mark.parametrize("tool", TOOLS)
def test_schema_driven_calls_never_fail_the_server_and_invalid_ones_never_write(
    tool, principals, theirs
):
    """Each tool in turn, by every kind of caller: every payload reaches validation (none is
    held back by a per-person limit), none is answered 5xx, none that is invalid writes."""
    tally = tally_for(f"tool fuzz: POST /api/tools/{tool}")

    @given(data=st.data())
    @settings(
        max_examples=EXAMPLES_PER_TOOL,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    def one_payload(data):
        principal = data.draw(st.sampled_from(sorted(principals)), label="principal")
        body = data.draw(arguments(tool), label="arguments")
        before = world()
        response = call(principals[principal], tool, body)
        tally.record(response.status_code, response.json(), principal)
        answer = check_answer(response, tool, before)
        if answer is not None and answer.get("ok") is True and tool in WRITES:
            assert world() != before or answer["data"].get("status") == "cancelled"

    one_payload()
    tally.check(minimum=EXAMPLES_PER_TOOL, principals=3)


# --- hand-written nasties -----------------------------------------------------------------------------

FAR_PAST = "0001-01-01T00:00:00-12:00"
FAR_FUTURE = "9999-12-31T23:59:59+14:00"


def _reserve(**changes: Any) -> dict[str, Any]:
    start, end = slot(days=3, hour=15)
    return {
        "room_id": "R7",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": 3,
        "expected_version": 0,
    } | changes


def _window(hours_ahead: int, offset: timezone) -> dict[str, str]:
    start = (datetime.now(UTC) + timedelta(days=4, hours=hours_ahead)).replace(
        minute=0, second=0, microsecond=0
    )
    return {
        "start_at": start.astimezone(offset).isoformat(),
        "end_at": (start + timedelta(hours=1)).astimezone(offset).isoformat(),
    }


NASTIES: list[tuple[str, str, Any, dict[str, str]]] = [
    # bodies that are not objects
    ("array", "list_my_bookings", b"[]", {}),
    ("string", "get_booking", b'"B1"', {}),
    ("number", "reserve_room", b"1", {}),
    ("null", "cancel_booking", b"null", {}),
    ("true", "find_available_rooms", b"true", {}),
    ("array_of_args", "reserve_room", json.dumps([_reserve()]).encode(), {}),
    # NaN and Infinity, bare and inside
    ("nan", "list_my_bookings", b"NaN", {}),
    ("nan_inside", "list_my_bookings", b'{"limit": NaN}', {}),
    ("infinity", "reserve_room", b'{"attendees": Infinity}', {}),
    ("minus_infinity", "reserve_room", b'{"expected_version": -Infinity}', {}),
    ("overflow", "list_my_bookings", b'{"limit": 1e999}', {}),
    # NUL bytes and lone surrogates, in keys and values
    ("nul_value", "get_booking", b'{"booking_id": "B1\\u0000"}', {}),
    ("nul_key", "get_booking", b'{"booking_id\\u0000": "B1"}', {}),
    ("lone_surrogate", "get_booking", b'{"booking_id": "\\ud800"}', {}),
    ("surrogate_key", "cancel_booking", b'{"\\udfff": 1}', {}),
    ("bad_utf8", "cancel_booking", b'{"booking_id": "\xff\xfe"}', {}),
    # a megabyte, and 10,000-deep nesting
    ("megabyte_string", "reserve_room", _reserve(room_id="R" + "7" * 1_048_576), {}),
    ("deep", "find_available_rooms", b"[" * 10_000 + b"]" * 10_000, {}),
    (
        "deep_inside",
        "find_available_rooms",
        b'{"equipment": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        {},
    ),
    # odd offsets (valid: they may book) and the ends of the calendar
    ("offset_+05:45", "reserve_room", _reserve(**_window(1, OFFSETS[1])), {}),
    ("offset_+14:00", "reserve_room", _reserve(**_window(3, OFFSETS[2])), {}),
    ("offset_-12:00", "find_available_rooms", {"attendees": 2, **_window(5, OFFSETS[3])}, {}),
    ("far_past", "reserve_room", _reserve(start_at=FAR_PAST, end_at=FAR_PAST), {}),
    ("far_future", "reserve_room", _reserve(start_at=FAR_FUTURE, end_at=FAR_FUTURE), {}),
    (
        "far_apart",
        "find_available_rooms",
        {"attendees": 1, "start_at": FAR_PAST, "end_at": FAR_FUTURE},
        {},
    ),
    (
        "naive",
        "reserve_room",
        _reserve(start_at="2026-12-01T10:00:00", end_at="2026-12-01T11:00:00"),
        {},
    ),
    (
        "backwards",
        "reserve_room",
        _reserve(**dict(zip(("end_at", "start_at"), _window(2, UTC).values(), strict=True))),
        {},
    ),
    # huge and negative integers
    ("huge_attendees", "reserve_room", _reserve(attendees=10**30), {}),
    ("huge_version", "reserve_room", _reserve(expected_version=10**30), {}),
    ("negative_version", "reserve_room", _reserve(expected_version=-(10**30)), {}),
    ("huge_limit", "list_my_bookings", {"limit": 10**100}, {}),
    ("float_limit", "list_my_bookings", {"limit": 10.0}, {}),
    ("bool_limit", "list_my_bookings", {"limit": True}, {}),
    # SQL and HTML in text
    ("sql_booking", "get_booking", {"booking_id": "B1' OR '1'='1"}, {}),
    ("sql_room", "reserve_room", _reserve(room_id="R7; DROP TABLE bookings_booking;--"), {}),
    ("html_cursor", "list_my_bookings", {"cursor": "<script>alert(1)</script>"}, {}),
    (
        "sql_cursor",
        "list_my_bookings",
        {"cursor": "eyJ' UNION SELECT password FROM accounts_user--"},
        {},
    ),
    ("html_key", "find_available_rooms", {"<img src=x onerror=alert(1)>": 1}, {}),
    ("approval_smuggled", "reserve_room", _reserve(approved=True, approval_id="x"), {}),
    # malformed Idempotency-Key headers
    ("key_too_long", "reserve_room", _reserve(), {"HTTP_IDEMPOTENCY_KEY": "k" * 101}),
    ("key_control", "reserve_room", _reserve(), {"HTTP_IDEMPOTENCY_KEY": "a\x01b"}),
    ("key_tab", "cancel_booking", {"booking_id": "B1"}, {"HTTP_IDEMPOTENCY_KEY": "\t"}),
    ("key_latin1", "reserve_room", _reserve(), {"HTTP_IDEMPOTENCY_KEY": "clé-ÿ"}),
    ("key_huge", "reserve_room", _reserve(), {"HTTP_IDEMPOTENCY_KEY": "x" * 10_000}),
    (
        "key_sql",
        "cancel_booking",
        {"booking_id": "B1"},
        {"HTTP_IDEMPOTENCY_KEY": "'; DELETE FROM agentops_idempotencyrecord;--"},
    ),
]


def test_hand_written_nasties_never_fail_the_server_nor_write_when_invalid(token, subtests):
    """One world for all of them (each compares it before and after itself)."""
    tally = tally_for("tool fuzz: hand-written nasties")
    for name, tool, body, headers in NASTIES:
        with subtests.test(name):
            if isinstance(body, dict) and body.get("expected_version") == 0:
                body = body | {"expected_version": Room.objects.get(code="R7").schedule_version}
            before = world()
            response = call(token, tool, body, **headers)
            tally.record(response.status_code, response.json(), "e17")
            answer = check_answer(response, tool, before)
            if answer is not None and answer.get("ok") is True and tool in WRITES:
                booking = Booking.objects.get(code=answer["data"]["booking_id"])
                sent = datetime.fromisoformat(body["start_at"])
                assert booking.during.lower == sent  # the same instant, whatever the offset
    tally.check(minimum=len(NASTIES), principals=1)


@pytest.mark.parametrize("tool", ["get_booking", "cancel_booking"])
def test_another_employees_booking_id_reads_as_no_booking(token, theirs, tool):
    before = world()
    mine = call(token, tool, {"booking_id": theirs.code}).json()
    unknown = call(token, tool, {"booking_id": "B987654"}).json()

    assert (mine["code"], mine["signal"]) == ("booking_not_found", "red")
    assert mine["message"] == unknown["message"].replace("B987654", theirs.code)
    assert world() == before
