"""agentops.rows: the runtime's hand-written reads return what the ORM would."""

from __future__ import annotations

import uuid

import pytest

from agentops.rows import action_same_succeeded
from tests.agentops.audit_factories import action_create, run_create

pytestmark = pytest.mark.django_db


def test_a_write_finds_the_same_call_the_run_already_succeeded_with(e17, e23):
    run = run_create(e17, status="running")
    # The first of two: the write; the second a copy deduplicated from it. Their ids sort the
    # other way round, so only proposal order picks the first.
    done = action_create(
        run,
        tool="reserve_room",
        status="succeeded",
        params_digest="same",
        id=uuid.UUID(int=2**127),
    )
    copy = action_create(
        run, tool="reserve_room", status="succeeded", params_digest="same", id=uuid.UUID(int=1)
    )
    again = action_create(run, tool="reserve_room", status="running", params_digest="same")
    # Not the same call: another digest, another tool, not succeeded, another run.
    action_create(run, tool="reserve_room", status="succeeded", params_digest="other")
    action_create(run, tool="cancel_booking", status="succeeded", params_digest="same")
    failed = action_create(run, tool="reserve_room", status="failed", params_digest="failed")
    theirs = run_create(e23, status="running")
    action_create(theirs, tool="reserve_room", status="succeeded", params_digest="failed")

    found = action_same_succeeded(again)

    assert found is not None
    assert (found.pk, found.run_id, found.status, found.result) == (
        done.pk,
        run.pk,
        "succeeded",
        done.result,
    )
    assert action_same_succeeded(done).pk == copy.pk  # never itself
    assert action_same_succeeded(failed) is None
