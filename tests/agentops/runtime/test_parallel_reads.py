"""The reads of one turn run at the same time; its writes run one at a time, in the order they
were proposed (seed 001: only side-effect-free calls may run in parallel)."""

from __future__ import annotations

import pytest

from agentops.models import Action
from agentops.runtime.runs import run_start
from tests.agentops.runtime.test_gate import END, START, find, reserve
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

TWO_ROOMS = (
    f"book R7 and R9 on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"
)


def test_a_turns_reads_run_together_and_its_writes_one_after_another(worker, e17):
    run = run_start(
        user=e17,
        request_text=TWO_ROOMS,
        model="scripted",
        script=[
            {"proposals": [find(), find(attendees=2)]},
            {"proposals": [reserve("R7"), reserve("R9")]},
        ],
        faults=[{"tool": "find_available_rooms", "kind": "pause"}],
    )

    # Both paused reads are running at once: neither waits for the other.
    wait_until(
        lambda: (
            Action.objects.filter(run=run, tool="find_available_rooms", status="running").count()
            == 2
        ),
        message="both reads of the turn to run at the same time",
    )
    release_faults(run.pk)
    wait_for_run(run.pk)

    first, second = Action.objects.filter(run=run, tool="reserve_room").order_by("call_index")
    assert (first.params["room_id"], second.params["room_id"]) == ("R7", "R9")
    assert first.status == second.status == "succeeded"
    assert second.started_at >= first.finished_at  # the second write began after the first ended
