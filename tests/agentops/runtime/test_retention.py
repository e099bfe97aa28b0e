"""Retention: past TRACE_PAYLOAD_RETENTION_DAYS a finished run's request text and trace
payloads are blanked by the sweeper task; the rows that say who did what, when, stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from agentops.models import AgentRun, TraceEvent
from agentops.runtime.sweeper import EXPIRED_GOAL, EXPIRED_PAYLOAD, trace_payloads_expire
from agentops.tasks import expire_trace_payloads_task
from tests.agentops.factories import action_create, run_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(e17, settings):
    settings.TRACE_PAYLOAD_RETENTION_DAYS = 30
    old, recent, unfinished = run_create(e17), run_create(e17), run_create(e17, status="running")
    for run in (old, recent, unfinished):
        action_create(run, params={"room_id": "R7"})
    AgentRun.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=31))
    AgentRun.objects.filter(pk=unfinished.pk).update(created_at=timezone.now() - timedelta(days=60))
    return old, recent, unfinished


def test_old_payloads_are_blanked_and_the_rest_kept(runs):
    old, recent, unfinished = runs
    counts = trace_payloads_expire()

    assert counts == {"runs": 1, "events": 2, "actions": 1, "approvals": 0}
    old.refresh_from_db()
    assert old.goal == EXPIRED_GOAL and old.reply == ""
    action = old.actions.get()
    assert action.params == action.result == EXPIRED_PAYLOAD  # the values go ...
    assert action.params_digest  # ... their digest stays
    assert list(old.events.values_list("payload", flat=True)) == [EXPIRED_PAYLOAD] * 2
    assert list(old.events.values_list("seq", flat=True)) == [1, 2]  # the sequence stays
    assert old.actions.get().tool == "find_available_rooms"
    for run in (recent, unfinished):
        run.refresh_from_db()
        assert run.goal != EXPIRED_GOAL
        assert EXPIRED_PAYLOAD not in list(run.events.values_list("payload", flat=True))


def test_a_second_sweep_changes_nothing(runs):
    trace_payloads_expire()
    assert trace_payloads_expire() == {"runs": 0, "events": 0, "actions": 0, "approvals": 0}


def test_zero_days_keeps_everything(runs, settings):
    settings.TRACE_PAYLOAD_RETENTION_DAYS = 0
    assert trace_payloads_expire() == {"runs": 0, "events": 0, "actions": 0, "approvals": 0}
    assert not TraceEvent.objects.filter(payload=EXPIRED_PAYLOAD).exists()


def test_batches_cover_every_due_run(e17, settings, monkeypatch):
    from agentops.runtime import sweeper

    monkeypatch.setattr(sweeper, "RETENTION_BATCH", 2)
    settings.TRACE_PAYLOAD_RETENTION_DAYS = 1
    for _ in range(5):
        run_create(e17)
    AgentRun.objects.update(finished_at=timezone.now() - timedelta(days=2))
    assert trace_payloads_expire()["runs"] == 5
    assert set(AgentRun.objects.values_list("goal", flat=True)) == {EXPIRED_GOAL}


def test_the_task_is_on_beats_schedule_and_runs_the_sweep(runs):
    tasks = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert "agentops.tasks.expire_trace_payloads_task" in tasks
    assert expire_trace_payloads_task.apply().get() == {
        "runs": 1,
        "events": 2,
        "actions": 1,
        "approvals": 0,
    }


def test_an_approval_requests_rendered_intent_is_blanked_with_its_run(runs, e17):
    from approvals.models import ApprovalRequest

    old, recent, _ = runs

    def request_for(run):
        return ApprovalRequest.objects.create(
            action_ref=str(run.actions.get().pk),
            run_ref=str(run.pk),
            requester=e17,
            binding={"intent_digest": "d" * 64},
            intent={
                "tool": "reserve_room",
                "params": {"room_id": "R16", "title": "Salary talk with Li Wei"},
                "goal": "book R16 for my salary talk with Li Wei",
                "subject": "E17",
                "labels": [["room_id", "Room"]],
            },
            deadline=timezone.now(),
        )

    expired, kept = request_for(old), request_for(recent)
    assert trace_payloads_expire()["approvals"] == 1

    expired.refresh_from_db()
    kept.refresh_from_db()
    assert "Li Wei" not in str(expired.intent)
    assert expired.intent == {
        "tool": "reserve_room",
        "labels": [["room_id", "Room"]],
        "subject": "E17",
        "expired": True,
    }
    assert expired.binding == {"intent_digest": "d" * 64}  # what was approved, as its digest
    assert "Li Wei" in kept.intent["goal"]
