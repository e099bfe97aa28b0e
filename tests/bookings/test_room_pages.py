"""find_available_rooms pages with a cursor (seed 001's resource contract): limit rooms a page,
smallest first, next_cursor until the last page, every fitting room exactly once; a cursor it
did not issue is refused and nothing is read past it."""

from __future__ import annotations

import pytest

from agentops.runtime.direct import tool_call_governed
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


def _search(**extra) -> dict:
    start, end = slot(days=2)
    return {"start_at": start.isoformat(), "end_at": end.isoformat(), "attendees": 1} | extra


def test_the_pages_list_every_fitting_room_once_in_order(transactional_db, e17):
    whole = tool_call_governed(user=e17, name="find_available_rooms", arguments=_search(limit=50))
    assert whole["data"]["has_more"] is False and whole["data"]["next_cursor"] is None
    everything = [r["room_id"] for r in whole["data"]["rooms"]]
    assert len(everything) >= 3

    seen, cursor, pages = [], None, 0
    while True:
        arguments = _search(limit=2) | ({"cursor": cursor} if cursor else {})
        page = tool_call_governed(user=e17, name="find_available_rooms", arguments=arguments)
        assert page["ok"], page
        seen += [r["room_id"] for r in page["data"]["rooms"]]
        pages += 1
        cursor = page["data"]["next_cursor"]
        assert page["data"]["has_more"] is (cursor is not None) is page["data"]["truncated"]
        if cursor is None:
            break

    assert seen == everything
    assert pages == -(-len(everything) // 2)


@pytest.mark.parametrize("cursor", ["not-a-cursor", "eyJhZnRlciI6IDF9", "e30"])
def test_a_cursor_it_did_not_issue_is_refused(transactional_db, e17, cursor):
    answer = tool_call_governed(
        user=e17, name="find_available_rooms", arguments=_search(cursor=cursor)
    )

    assert (answer["ok"], answer["reason"], answer["code"]) == (
        False,
        "invalid_input",
        "bad_cursor",
    )


@pytest.mark.parametrize("limit", [0, 51, "3"])
def test_a_limit_outside_1_to_50_is_refused_by_the_schema(transactional_db, e17, limit):
    answer = tool_call_governed(
        user=e17, name="find_available_rooms", arguments=_search(limit=limit)
    )

    assert (answer["ok"], answer["reason"]) == (False, "invalid_input")
