"""list_my_bookings pages through every booking of a person, however many, over the runtime's
path (gate, execution, the output cap): a page that does not fit the tool's max_output_bytes
shrinks and keeps its cursor, never loses its tail (issue 36: 30 bookings read as 25 and
has_more false). ``from``/``to`` read just one window of them."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from agentops.contract.exports import input_schema, mcp_tool
from agentops.runtime import registry
from agentops.runtime.direct import tool_call_governed
from bookings.models import Booking
from tests.bookings.factories import person_with_bookings
from tests.conftest import SHANGHAI

pytestmark = pytest.mark.django_db(transaction=True)

CAP = 4096  # list_my_bookings' max_output_bytes (the default)


def _read_all(user, **window) -> tuple[list[str], list[dict]]:
    """Every page of ``user``'s bookings, 50 asked a page, as the runtime answers them."""
    codes, pages, cursor = [], [], None
    while True:
        arguments = {"limit": 50, **window} | ({"cursor": cursor} if cursor else {})
        page = tool_call_governed(user=user, name="list_my_bookings", arguments=arguments)
        assert page["ok"], page
        pages.append(page)
        codes += [b["booking_id"] for b in page["data"]["bookings"]]
        cursor = page["data"]["next_cursor"]
        if not page["data"]["has_more"]:
            return codes, pages
        assert len(pages) < 100, "the pages never end"


@pytest.mark.parametrize("count", [0, 1, 25, 26, 60, 300])
def test_paging_lists_every_booking_exactly_once(e17, e23, count):
    made = person_with_bookings(e17, count)
    person_with_bookings(e23, 3)  # someone else's: never listed

    codes, pages = _read_all(e17)

    assert codes == [b.code for b in reversed(made)]  # newest first, each once, none skipped
    for page in pages:
        data = page["data"]
        assert len(json.dumps(page).encode()) <= CAP
        assert "truncated" not in page  # the tool fitted its page: the runtime cut nothing
        assert data["has_more"] is (data["next_cursor"] is not None)
        assert page["next_cursor"] == data["next_cursor"]
    assert all(p["data"]["has_more"] for p in pages[:-1]) and not pages[-1]["data"]["has_more"]
    # A page shrinks only as far as the cap needs: 50 bookings do not fit 4096 bytes, 20 do.
    assert all(len(p["data"]["bookings"]) >= 20 for p in pages[:-1])


def test_a_window_lists_exactly_the_bookings_overlapping_it(e17):
    made = person_with_bookings(e17, 60)
    day = made[30].during.lower.astimezone(SHANGHAI).replace(hour=0, minute=0)
    window = {"from": day.isoformat(), "to": (day + timedelta(days=1)).isoformat()}

    codes, pages = _read_all(e17, **window)

    on_day = [b.code for b in reversed(made) if day <= b.during.lower < day + timedelta(days=1)]
    assert len(pages) == 1 and codes == on_day and len(on_day) == 11
    # One end open: what ends after ``from`` / starts before ``to``.
    after, _ = _read_all(e17, **{"from": day.isoformat()})
    assert after == [b.code for b in reversed(made) if b.during.upper > day]
    before, _ = _read_all(e17, to=day.isoformat())
    assert before == [b.code for b in reversed(made) if b.during.lower < day]
    # A booking that only overlaps the window's edge is in it; one that ends at its start is not.
    nine = made[30].during.lower
    edge, _ = _read_all(
        e17,
        **{"from": (nine + timedelta(minutes=30)).isoformat()},
        to=(nine + timedelta(minutes=40)).isoformat(),
    )
    assert edge == [made[30].code]
    last_of_day, first_of_next = made[32], made[33]  # 18:00-19:00, and 08:00 the day after
    touching, _ = _read_all(
        e17,
        **{"from": last_of_day.during.upper.isoformat()},
        to=first_of_next.during.lower.isoformat(),
    )
    assert touching == []


@pytest.mark.parametrize(
    ("window", "code"),
    [
        ({"from": "2026-12-10T00:00:00"}, "schema_violation"),  # no offset
        ({"to": "2026-12-10"}, "schema_violation"),
        ({"from": "2026-12-10T09:00:00+08:00", "to": "2026-12-10T09:00:00+08:00"}, "bad_window"),
        ({"from_": "2026-12-10T09:00:00+08:00"}, "schema_violation"),  # the field is "from"
    ],
)
def test_a_window_without_an_offset_or_the_wrong_way_round_is_refused(e17, window, code):
    answer = tool_call_governed(user=e17, name="list_my_bookings", arguments=window)

    assert (answer["ok"], answer["reason"], answer["code"]) == (False, "invalid_input", code)
    assert Booking.objects.count() == 0


def test_the_published_schema_says_from_to_and_the_paging_promise():
    spec = registry.get("list_my_bookings")
    for schema in (input_schema(spec), mcp_tool(spec)["inputSchema"]):
        props = schema["properties"]
        assert {"limit", "cursor", "from", "to"} == set(props)
        for end in ("from", "to"):
            text = json.dumps(props[end])
            assert '"date-time"' in text and "offset" in props[end]["description"]
    text = spec.description.render()
    assert "from" in text and "shrinks" in text and "has_more" in text
