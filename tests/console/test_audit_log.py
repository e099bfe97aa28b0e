"""The audit log screen: every tool call and every human decision, filtered, paged, exported
(CSV, JSON lines) with personal data redacted unless asked for, and every export audited."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.models import AuditAction, AuditEntry
from agentops.models import Action
from tests.agentops.factories import action_create, decision_create, run_create

pytestmark = pytest.mark.django_db

URL = reverse("ops:audit")
EXPORT = reverse("ops:audit-export")


@pytest.fixture
def log(e17, e23, approver):
    """e17: a search and a booking; e23: a refused booking of high risk; a01: an approval."""
    mine = run_create(e17, goal="Book R7 for my secret interview")
    action_create(mine, tool="find_available_rooms")
    action_create(mine, tool="reserve_room", risk="MEDIUM", idempotency_key=f"{mine.pk}:2:0")
    theirs = run_create(e23, status="failed")
    action_create(theirs, tool="reserve_room", status="rejected", risk="HIGH")
    decision_create(approver, run=mine, reason="Private: candidate is Ms. Wu")
    return mine


def refs(response) -> list[tuple[str, str]]:
    """(kind, what) of the rows shown: the tool's name (a data attribute; the cell says it in
    words) or the decision as the What column words it."""
    html = response.content.decode()
    rows = []
    for chunk in html.split('<tr data-kind="')[1:]:
        kind = chunk.split('"', 1)[0]
        name = chunk.split('data-name="', 1)[1].split('"', 1)[0]
        what = chunk.split('data-label="What">', 1)[1].split("</td>", 1)[0].strip()
        rows.append((kind, name if kind == "tool" else what))
    return rows


def test_an_admin_sees_tool_calls_and_decisions_newest_first(client, admin_user, log):
    client.force_login(admin_user)
    response = client.get(URL)
    assert response.status_code == 200
    assert refs(response) == [
        ("human", "Approved an action"),
        ("tool", "reserve_room"),
        ("tool", "reserve_room"),
        ("tool", "find_available_rooms"),
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"user": "e23"}, [("tool", "reserve_room")]),
        ({"user": "A01"}, [("human", "Approved an action")]),  # employee id, any case
        ({"tool": "find_available_rooms"}, [("tool", "find_available_rooms")]),
        ({"outcome": "rejected"}, [("tool", "reserve_room")]),
        ({"outcome": "approval.approved"}, [("human", "Approved an action")]),
        ({"risk": "HIGH"}, [("tool", "reserve_room")]),
        ({"kind": "human"}, [("human", "Approved an action")]),
        ({"user": "e17", "kind": "tool", "risk": "LOW"}, [("tool", "find_available_rooms")]),
        ({"user": "nobody"}, []),
    ],
)
def test_filters(client, admin_user, log, query, expected):
    client.force_login(admin_user)
    assert refs(client.get(URL, query)) == expected


def test_the_date_filter_uses_local_days(client, admin_user, log):
    old = timezone.now() - timedelta(days=10)
    Action.objects.filter(tool="find_available_rooms").update(created_at=old)
    client.force_login(admin_user)
    day = timezone.localdate(old).isoformat()
    assert refs(client.get(URL, {"date_from": day, "date_to": day})) == [
        ("tool", "find_available_rooms")
    ]
    after = (timezone.localdate(old) + timedelta(days=1)).isoformat()
    assert ("tool", "find_available_rooms") not in refs(client.get(URL, {"date_from": after}))


def test_a_bad_filter_value_is_ignored_not_an_error(client, admin_user, log):
    client.force_login(admin_user)
    response = client.get(URL, {"date_from": "yesterday", "risk": "EXTREME", "page": "x"})
    assert response.status_code == 200
    assert len(refs(response)) == 4


def test_pages_of_fifty(client, admin_user, e17):
    run = run_create(e17)
    for _ in range(120):
        action_create(run)
    client.force_login(admin_user)
    first, third = client.get(URL), client.get(URL, {"page": 3})
    assert len(refs(first)) == 50 and len(refs(third)) == 20
    assert 'data-count="120"' in first.content.decode()
    assert "Page 3 of 3" in third.content.decode()
    seen = {row.split('"')[0] for row in third.content.decode().split('data-ref="')[1:]}
    seen_first = {row.split('"')[0] for row in first.content.decode().split('data-ref="')[1:]}
    assert not seen & seen_first


def test_htmx_gets_only_the_results(client, admin_user, log):
    client.force_login(admin_user)
    response = client.get(URL, {"tool": "reserve_room"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "<html" not in html and 'data-kind="tool"' in html


def test_an_employee_gets_403_and_an_anonymous_visitor_the_login(client, e17, log):
    assert client.get(URL).status_code == 302
    client.force_login(e17)
    assert client.get(URL).status_code == 403
    before = AuditEntry.objects.count()
    assert client.post(EXPORT, {"export_format": "csv"}).status_code == 403
    assert AuditEntry.objects.count() == before


def test_the_navigation_shows_admin_links_to_admins_only(client, e17, admin_user):
    client.force_login(e17)
    assert URL not in client.get(reverse("bookings:mine")).content.decode()
    client.force_login(admin_user)
    html = client.get(reverse("bookings:mine")).content.decode()
    assert URL in html and reverse("ops:drills") in html


def _body(response) -> str:
    assert response.streaming
    return b"".join(response.streaming_content).decode()


def test_a_csv_export_redacts_request_text_and_notes_by_default_and_is_audited(
    client, admin_user, log
):
    client.force_login(admin_user)
    response = client.post(EXPORT, {"export_format": "csv", "user": "e17"})
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    text = _body(response)
    records = list(csv.DictReader(io.StringIO(text)))
    assert [r["name"] for r in records] == ["reserve_room", "find_available_rooms"]
    assert "secret interview" not in text and "Ms. Wu" not in text
    assert {r["request"] for r in records} == {"[redacted]"}
    assert records[0]["idempotency_key"] == f"{log.pk}:2:0"
    audit = AuditEntry.objects.get(action=AuditAction.AUDIT_EXPORTED)
    assert audit.actor == admin_user
    assert audit.detail == {"format": "csv", "personal_data": False, "filters": {"user": "e17"}}


def test_a_json_lines_export_with_personal_data_keeps_it_and_says_so_in_the_audit(
    client, admin_user, log
):
    client.force_login(admin_user)
    response = client.post(EXPORT, {"export_format": "jsonl", "personal_data": "on"})
    lines = [json.loads(line) for line in _body(response).splitlines()]
    # The export's own audit row is written before the rows are read: it is the newest.
    assert [r["kind"] for r in lines] == ["human", "human", "tool", "tool", "tool"]
    assert lines[0]["name"] == "audit.exported" and lines[0]["detail"]["personal_data"] is True
    assert lines[1]["detail"] == {"reason": "Private: candidate is Ms. Wu"}
    assert lines[-1]["request"] == "Book R7 for my secret interview"
    audit = AuditEntry.objects.get(action=AuditAction.AUDIT_EXPORTED)
    assert audit.detail["personal_data"] is True and audit.detail["format"] == "jsonl"


def test_a_redacted_json_lines_export_redacts_decision_reasons(client, admin_user, log):
    client.force_login(admin_user)
    response = client.post(EXPORT, {"export_format": "jsonl", "kind": "human"})
    lines = [json.loads(line) for line in _body(response).splitlines()]
    approved = next(r for r in lines if r["name"] == "approval.approved")
    assert approved["detail"] == {"reason": "[redacted]"}
    assert approved["run_id"] == str(log.pk)


def test_an_export_streams_in_chunks_past_one_batch(client, admin_user, e17):
    run = run_create(e17)
    Action.objects.bulk_create(
        [
            Action(
                run=run,
                turn=1,
                call_index=i,
                tool="find_available_rooms",
                params={},
                params_digest="d",
                status="succeeded",
            )
            for i in range(1200)
        ]
    )
    client.force_login(admin_user)
    response = client.post(EXPORT, {"export_format": "jsonl", "kind": "tool"})
    assert len(_body(response).splitlines()) == 1200


@pytest.mark.django_db(transaction=True)
def test_under_asgi_an_export_streams_piece_by_piece(admin_user, e17):
    """Django reads a sync iterator whole before sending it under ASGI; the export gives it an
    async one, so the pieces leave as they are made."""
    import asyncio
    import warnings

    from django.test import AsyncClient

    run = run_create(e17)
    Action.objects.bulk_create(
        [
            Action(
                run=run,
                turn=1,
                call_index=i,
                tool="find_available_rooms",
                params={},
                params_digest="d",
                status="succeeded",
            )
            for i in range(700)
        ]
    )

    async def export() -> list[bytes]:
        client = AsyncClient()
        await client.aforce_login(admin_user)
        response = await client.post(EXPORT, {"export_format": "csv"})
        return [piece async for piece in response.streaming_content]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pieces = asyncio.run(export())
    assert len(pieces) > 2
    assert b"".join(pieces).decode().count("find_available_rooms") == 700


def test_rows_read_in_words_with_the_record_behind_a_disclosure(client, admin_user, log):
    client.force_login(admin_user)
    html = client.get(URL).content.decode()
    assert 'data-label="What">Book a room' in html
    assert 'data-label="What">Look for free rooms' in html
    assert 'data-label="Room">R7' in html
    assert "<details>" in html and "<summary>Show the record</summary>" in html
    # the JSON is inside the disclosure, not a column of its own
    before_details = html.split("<details>", 1)[0]
    assert '<pre class="json">' not in before_details


def test_drill_rows_are_hidden_unless_asked_for_and_marked(client, admin_user, log):
    from accounts.models import Role
    from tests.accounts.factories import group_get, user_create

    drill = user_create("drill-e1", roles=[])
    drill.groups.add(group_get(Role.SANDBOX))
    rehearsal = run_create(drill, goal="drill")
    action_create(rehearsal, tool="reserve_room", status="rejected")
    client.force_login(admin_user)

    hidden = client.get(URL).content.decode()
    shown = client.get(URL, {"drills": "on"}).content.decode()

    assert 'data-drill="true"' not in hidden and "drill-e1" not in hidden
    assert shown.count('data-drill="true"') == 1 and "drill-e1" in shown
    assert len(refs(client.get(URL, {"drills": "on"}))) == len(refs(client.get(URL))) + 1
