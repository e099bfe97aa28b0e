"""The room catalogue the assistant matches names against is read once per Celery task (a run's
steps are planned in the task that started it) and on every call outside a task."""

from __future__ import annotations

import pytest
from celery import signals

from bookings import assistant
from bookings.assistant import room_catalogue
from bookings.models import Room

pytestmark = pytest.mark.usefixtures("rooms")


def _names() -> dict[str, str]:
    return {r.code: r.name for r in room_catalogue()}


def _receivers(signal) -> list:
    return [ref() if callable(ref) else ref for _, ref in signal.receivers]


def test_the_scope_is_each_celery_task():
    assert assistant._rooms_task_started in _receivers(signals.task_prerun)
    assert assistant._rooms_task_ended in _receivers(signals.task_postrun)


def test_a_task_reads_the_catalogue_once_and_the_next_task_reads_it_again(
    django_assert_num_queries,
):
    assistant._rooms_task_started()  # what a task's start sends
    try:
        with django_assert_num_queries(2):
            first = _names()
            Room.objects.filter(code="R7").update(name="Renamed")
            assert _names() == first  # the same task: as read at its first step
    finally:
        assistant._rooms_task_ended()
    assistant._rooms_task_started()
    try:
        assert _names()["R7"] == "Renamed"  # the next task reads it again
    finally:
        assistant._rooms_task_ended()


def test_outside_a_task_every_call_reads(django_assert_num_queries):
    with django_assert_num_queries(2):
        before = _names()
        Room.objects.filter(code="R7").update(name="Renamed")
    assert before["R7"] != "Renamed"
    assert _names()["R7"] == "Renamed"
