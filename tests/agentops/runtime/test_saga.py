"""Multi-room requests are sagas (seed 001), end to end with a real Celery worker, Redis and
PostgreSQL: each write is registered with its compensation before it runs; when a later step
fails, or the user cancels, the confirmed writes are released in reverse order through the same
recorder (keyed, traced, verified); a release that fails leaves the run rollback_pending."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.contract import success
from agentops.models import Action, AgentRun, IdempotencyRecord
from agentops.runtime import registry, sweeper
from agentops.runtime.runs import run_cancel, run_start
from agentops.runtime.saga import saga_retry
from agentops.selectors import runs_rollback_pending
from bookings.models import Booking, Room
from bookings.services import booking_reserve
from tests.conftest import slot
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=2)
WHEN = f"{START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M}"
TWO_ROOMS_EN = f"R7 and R9 on {WHEN} for a workshop"
TWO_ROOMS_ZH = f"{START:%Y 年 %-m 月 %-d 日} {START:%H:%M}-{END:%H:%M} 订 R7 和 R9 开工作坊"
ONE_ROOM = f"Book R7 on {WHEN} for 3 people"
PAUSE_SECOND_RESERVE = {"tool": "reserve_room", "kind": "pause", "calls": [2]}
CANCEL_ALWAYS_FAILS = {"tool": "cancel_booking", "kind": "db_error"}


def versions() -> dict[str, int]:
    return dict(Room.objects.values_list("code", "schedule_version"))


def calls(run: AgentRun) -> list[tuple[str, str, str]]:
    """(tool, room or booking, status) of every action, in order."""
    return [
        (a.tool, a.params.get("room_id") or a.params.get("booking_id"), a.status)
        for a in run.actions.order_by("turn", "call_index")
    ]


def kinds(run: AgentRun) -> list[str]:
    return list(run.events.order_by("seq").values_list("kind", flat=True))


def assert_undo_traced(run: AgentRun, undo: Action) -> None:
    """The compensation went through the recorder like any call: planned with its key, started,
    finished, verified; every event numbered in order."""
    events = list(run.events.order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    own = [e.kind for e in events if e.action_id == undo.pk]
    assert own[0] == "compensation_planned"
    assert own.count("execution_started") == undo.attempts
    planned = next(e for e in events if e.action_id == undo.pk)
    assert planned.payload["idempotency_key"] == undo.idempotency_key
    assert planned.payload["compensates_key"] == undo.compensates.idempotency_key


def booked_while_paused(run: AgentRun, *, rival, room: str) -> None:
    """Someone else books ``room`` while our second write is held, then lets it go."""
    wait_until(
        lambda: Action.objects.filter(
            run=run, tool="reserve_room", params__room_id=room, status="running"
        ).exists(),
        message=f"the {room} reserve to start",
    )
    booking_reserve(
        user=rival, room_code=room, start_at=START, end_at=END, attendees=2, idempotency_key="rival"
    )
    release_faults(run.pk)


# --- the happy path: two writes, each registered with its undo --------------------------------


@pytest.mark.parametrize("text", [TWO_ROOMS_EN, TWO_ROOMS_ZH], ids=["en", "zh"])
def test_two_named_rooms_are_one_run_with_two_writes(worker, e17, text):
    before = versions()
    run = wait_for_run(run_start(user=e17, request_text=text).pk)

    assert run.status == "succeeded", run.reply
    assert run.delegation["resources"] == ["R7", "R9"] and run.delegation["max_writes"] == 2
    assert calls(run) == [
        ("find_available_rooms", None, "succeeded"),
        ("reserve_room", "R7", "succeeded"),
        ("reserve_room", "R9", "succeeded"),
    ]
    bookings = {b.room.code: b for b in Booking.objects.filter(requester=e17)}
    assert set(bookings) == {"R7", "R9"}
    assert all(b.status == "confirmed" for b in bookings.values())
    # No head count: each room is booked whole.
    assert (bookings["R7"].attendees, bookings["R9"].attendees) == (4, 6)
    after = versions()
    assert (after["R7"], after["R9"]) == (before["R7"] + 1, before["R9"] + 1)
    for write in run.actions.filter(tool="reserve_room"):
        # Registered with its undo before it ran: on the action and in its gate event.
        intent = {"tool": "cancel_booking", "key": f"{write.idempotency_key}:compensate"}
        assert write.compensation == intent
        assert run.events.get(kind="gate", action=write).payload["compensation"] == intent
    assert bookings["R7"].code in run.reply and bookings["R9"].code in run.reply
    assert not run.actions.filter(compensates__isnull=False).exists()


def test_a_named_room_that_is_not_free_books_none_of_them(worker, e17, e23):
    booking_reserve(
        user=e23, room_code="R9", start_at=START, end_at=END, attendees=2, idempotency_key="r9"
    )
    before = versions()
    run = wait_for_run(run_start(user=e17, request_text=TWO_ROOMS_EN).pk)

    assert run.status == "failed"
    assert calls(run) == [("find_available_rooms", None, "succeeded")]
    assert versions() == before and not Booking.objects.filter(requester=e17).exists()
    assert "R9 is not free" in run.reply and "Nothing was booked" in run.reply


# --- second write fails: the first is released -----------------------------------------------


def test_second_write_fails_so_the_first_is_released(worker, e17, e23):
    before = versions()
    run = run_start(user=e17, request_text=TWO_ROOMS_EN, faults=[PAUSE_SECOND_RESERVE])
    booked_while_paused(run, rival=e23, room="R9")
    run = wait_for_run(run.pk)

    assert (run.status, run.outcome) == ("failed", "gave_up")
    r7 = Booking.objects.get(requester=e17)
    first = run.actions.get(tool="reserve_room", params__room_id="R7")
    assert calls(run) == [
        ("find_available_rooms", None, "succeeded"),
        ("reserve_room", "R7", "succeeded"),
        ("reserve_room", "R9", "failed"),
        ("find_available_rooms", None, "succeeded"),  # the conflict: look again; R9 is gone
        ("cancel_booking", r7.code, "succeeded"),
    ]
    assert run.actions.get(tool="reserve_room", params__room_id="R9").result["reason"] == "conflict"
    # R7 was booked, then released by the compensation, under the compensation's key.
    undo = run.actions.get(tool="cancel_booking")
    assert (
        undo.compensates == first and undo.idempotency_key == f"{first.idempotency_key}:compensate"
    )
    assert (r7.status, r7.cancel_key, r7.cancelled_by) == ("cancelled", undo.idempotency_key, e17)
    after = versions()
    assert after["R7"] == before["R7"] + 2  # reserve, then cancel
    assert after["R9"] == before["R9"] + 1  # the rival's booking only
    assert Booking.objects.filter(status="confirmed").count() == 1  # the rival's
    assert IdempotencyRecord.objects.get(key=undo.idempotency_key).status == "completed"
    trace = kinds(run)
    assert trace.index("run_compensating") < trace.index("compensation_planned")
    assert trace[-1] == "run_finished"
    assert run.events.get(kind="verified", action=undo).payload["holds"] is True
    assert_undo_traced(run, undo)
    assert run.reply.startswith("Nothing was booked") and "R9 is not free" in run.reply
    assert f"{r7.code} had already been booked and was released." in run.reply


def test_a_budget_that_runs_out_after_the_first_room_releases_it(worker, e17):
    """Three proposals allowed: the search, R7, then R9 is one too many: the run ends."""
    before = versions()
    run = wait_for_run(
        run_start(user=e17, request_text=TWO_ROOMS_EN, budgets={"max_proposals": 2}).pk
    )

    assert (run.status, run.outcome) == ("failed", "budget_exhausted")
    r7 = Booking.objects.get(requester=e17)
    assert r7.status == "cancelled" and r7.cancel_key.endswith(":compensate")
    assert calls(run)[-1] == ("cancel_booking", r7.code, "succeeded")
    assert versions()["R7"] == before["R7"] + 2 and versions()["R9"] == before["R9"]
    assert f"{r7.code} had already been booked and was released." in run.reply


def test_three_rooms_are_released_last_first(worker, e17, e23):
    run = run_start(
        user=e17,
        request_text=f"R7, R9 and R5 on {WHEN} for a workshop",
        faults=[{"tool": "reserve_room", "kind": "pause", "calls": [3]}],
    )
    booked_while_paused(run, rival=e23, room="R5")
    run = wait_for_run(run.pk)

    assert run.status == "failed"
    undos = list(run.actions.filter(tool="cancel_booking").order_by("call_index"))
    assert [u.compensates.params["room_id"] for u in undos] == ["R9", "R7"]
    assert [u.started_at for u in undos] == sorted(u.started_at for u in undos)
    assert not Booking.objects.filter(requester=e17, status="confirmed").exists()


def test_a_model_that_stops_after_one_of_two_rooms_does_not_succeed(worker, e17):
    version = Room.objects.get(code="R7").schedule_version
    reserve = {
        "room_id": "R7",
        "start_at": START.isoformat(),
        "end_at": END.isoformat(),
        "attendees": 4,
        "expected_version": version,
    }
    script = [
        {"proposals": [{"tool": "reserve_room", "arguments": reserve}]},
        {"message": "All booked!", "outcome": "done"},
    ]
    run = wait_for_run(
        run_start(user=e17, request_text=TWO_ROOMS_EN, model="scripted", script=script).pk
    )

    assert (run.status, run.outcome) == ("failed", "not_done")
    r7 = Booking.objects.get(requester=e17)
    assert r7.status == "cancelled" and r7.cancel_key.endswith(":compensate")
    assert "Booked" not in run.reply and "was released" in run.reply


# --- the compensation fails: rollback_pending with the evidence -------------------------------


def test_a_failed_compensation_leaves_the_run_rollback_pending(worker, e17, e23, settings):
    settings.AGENT_RETRY_BACKOFF_SCALE = 0
    run = run_start(
        user=e17,
        request_text=TWO_ROOMS_EN,
        faults=[PAUSE_SECOND_RESERVE, CANCEL_ALWAYS_FAILS],
    )
    booked_while_paused(run, rival=e23, room="R9")
    run = wait_for_run(run.pk, statuses=("rollback_pending", "failed", "cancelled"))

    r7 = Booking.objects.get(requester=e17)
    assert r7.status == "confirmed" and r7.cancel_key == ""  # still booked: nothing pretended
    undo = run.actions.get(tool="cancel_booking")
    assert (undo.status, undo.attempts) == ("failed", 4)  # 1 + 3 yellow retries, then a human
    assert undo.result["reason"] == "unavailable"
    assert run.finished_at is None and run.outcome == "gave_up"
    pending = run.events.get(kind="run_rollback_pending").payload
    assert pending["held"] == [r7.code] and pending["released"] == []
    assert pending["evidence"][0]["key"] == undo.idempotency_key
    assert pending["evidence"][0]["status"] == "failed"
    assert f"{r7.code} had already been booked and is still booked" in run.reply
    assert "Nothing was booked" not in run.reply
    assert_undo_traced(run, undo)
    queue = runs_rollback_pending()
    assert [p.run.pk for p in queue] == [run.pk]
    assert queue[0].held == [r7.code] and queue[0].compensations == [undo]


def test_an_operator_retry_of_a_failed_rollback_releases_and_ends_the_run(
    worker, e17, e23, admin_user, settings
):
    settings.AGENT_RETRY_BACKOFF_SCALE = 0
    run = run_start(
        user=e17,
        request_text=TWO_ROOMS_EN,
        faults=[PAUSE_SECOND_RESERVE, CANCEL_ALWAYS_FAILS],
    )
    booked_while_paused(run, rival=e23, room="R9")
    run = wait_for_run(run.pk, statuses=("rollback_pending", "failed", "cancelled"))
    AgentRun.objects.filter(pk=run.pk).update(faults=[])  # the booking service is back
    version = Room.objects.get(code="R7").schedule_version

    saga_retry(run_id=run.pk, operator=admin_user)
    run = wait_for_run(run.pk)
    saga_retry(run_id=run.pk, operator=admin_user)  # a second click changes nothing

    r7 = Booking.objects.get(requester=e17)
    assert (run.status, run.outcome) == ("failed", "gave_up")
    failed, retried = run.actions.filter(tool="cancel_booking").order_by("turn")
    assert (failed.status, retried.status) == ("failed", "succeeded")
    assert failed.idempotency_key == retried.idempotency_key == r7.cancel_key
    assert r7.status == "cancelled"
    assert Room.objects.get(code="R7").schedule_version == version + 1  # one cancel
    assert run.events.filter(kind="run_compensating").count() == 2
    assert run.events.filter(kind="run_compensating").last().payload["retry_by"] == "admin"
    assert run.reply.startswith("Nothing was booked") and "was released" in run.reply
    assert "still booked" not in run.reply
    assert runs_rollback_pending() == []


def test_an_operator_retries_a_failed_rollback_from_the_queue(worker, e17, e23, settings):
    """The queue lists the run under "Rollbacks that failed"; an employee's POST is refused and
    writes nothing; the operator's retry releases the booking once, audited."""
    from django.test import Client
    from django.urls import reverse

    from accounts.models import AuditAction, AuditEntry
    from tests.accounts.factories import EMPLOYEES, user_create

    settings.AGENT_RETRY_BACKOFF_SCALE = 0
    operator = user_create("o01", roles=[EMPLOYEES, "operators"])
    run = run_start(
        user=e17, request_text=TWO_ROOMS_EN, faults=[PAUSE_SECOND_RESERVE, CANCEL_ALWAYS_FAILS]
    )
    booked_while_paused(run, rival=e23, room="R9")
    run = wait_for_run(run.pk, statuses=("rollback_pending", "failed", "cancelled"))
    AgentRun.objects.filter(pk=run.pk).update(faults=[])
    r7 = Booking.objects.get(requester=e17)
    url = reverse("operators:rollback_retry", args=[run.pk])

    employee = Client()
    employee.force_login(e17)
    assert employee.post(url).status_code == 403
    assert AgentRun.objects.get(pk=run.pk).status == "rollback_pending"
    assert not AuditEntry.objects.exists()

    client = Client()
    client.force_login(operator)
    page = client.get(reverse("operators:queue")).content.decode()
    assert f'data-run="{run.pk}"' in page and r7.code in page
    assert client.post(url, headers={"HX-Request": "true"}).status_code == 200
    run = wait_for_run(run.pk)
    assert (run.status, Booking.objects.get(pk=r7.pk).status) == ("failed", "cancelled")
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.run_id) == (
        operator,
        AuditAction.ROLLBACK_RESOLVED,
        run.pk,
    )
    again = client.post(url, headers={"HX-Request": "true"}).content.decode()
    assert "no longer waits" in again and AuditEntry.objects.count() == 1


def test_a_retried_compensation_does_not_cancel_twice(worker, e17, e23):
    """The release commits, then its answer is lost: the runtime asks cancel_booking what
    happened under the compensation's key, finds it, and does not cancel again."""
    run = run_start(
        user=e17,
        request_text=TWO_ROOMS_EN,
        faults=[PAUSE_SECOND_RESERVE, {"tool": "cancel_booking", "kind": "lose_receipt"}],
    )
    booked_while_paused(run, rival=e23, room="R9")
    run = wait_for_run(run.pk)

    assert run.status == "failed", run.reply
    r7 = Booking.objects.get(requester=e17)
    undo = run.actions.get(tool="cancel_booking")
    assert (undo.status, undo.attempts) == ("succeeded", 1)
    lookup = run.events.get(kind="reconcile_lookup", action=undo).payload
    assert lookup["status"] == "found" and lookup["receipt"]["booking_id"] == r7.code
    assert r7.status == "cancelled" and r7.cancel_key == undo.idempotency_key
    # One cancel: the version the cancel produced is the room's current one.
    assert r7.cancelled_version == Room.objects.get(code="R7").schedule_version
    assert r7.cancelled_version == r7.created_version + 1
    assert f"{r7.code} had already been booked and was released." in run.reply


# --- a cancel while a write is in flight ------------------------------------------------------


def cancel_while_writing(user, *, faults):
    """Start a one-room run whose reserve commits and is then held; cancel it meanwhile."""
    run = run_start(user=user, request_text=ONE_ROOM, faults=faults)
    wait_until(lambda: Booking.objects.filter(requester=user).exists(), message="the write")
    run = run_cancel(run_id=run.pk, user=user)
    assert run.status == "compensating"  # it waits for the write's real outcome
    release_faults(run.pk)
    return run


def test_cancel_during_a_write_releases_what_it_booked(worker, e17):
    before = versions()
    run = cancel_while_writing(e17, faults=[{"tool": "reserve_room", "kind": "pause_after_commit"}])
    run = wait_for_run(run.pk)

    booking = Booking.objects.get(requester=e17)
    assert (run.status, run.outcome) == ("cancelled", "cancelled_by_user")
    assert run.reply == f"Cancelled; {booking.code} had already been booked and was released."
    assert booking.status == "cancelled" and booking.cancel_key.endswith(":compensate")
    assert versions()["R7"] == before["R7"] + 2
    assert calls(run) == [
        ("find_available_rooms", "R7", "succeeded"),
        ("reserve_room", "R7", "succeeded"),
        ("cancel_booking", booking.code, "succeeded"),
    ]
    assert_undo_traced(run, run.actions.get(tool="cancel_booking"))


def test_cancel_during_a_write_says_still_booked_when_the_release_fails(worker, e17, settings):
    settings.AGENT_RETRY_BACKOFF_SCALE = 0
    run = cancel_while_writing(
        e17,
        faults=[{"tool": "reserve_room", "kind": "pause_after_commit"}, CANCEL_ALWAYS_FAILS],
    )
    run = wait_for_run(run.pk, statuses=("rollback_pending", "failed", "cancelled"))

    booking = Booking.objects.get(requester=e17)
    assert booking.status == "confirmed"
    assert run.reply.startswith(f"Cancelled; {booking.code} had already been booked and is still")
    assert run.outcome == "cancelled_by_user"
    assert [p.run.pk for p in runs_rollback_pending()] == [run.pk]


def test_cancel_during_a_write_whose_answer_is_lost_finds_it_by_key_and_releases_it(worker, e17):
    run = cancel_while_writing(
        e17,
        faults=[
            {"tool": "reserve_room", "kind": "pause_after_commit"},
            {"tool": "reserve_room", "kind": "lose_receipt"},
        ],
    )
    run = wait_for_run(run.pk)

    booking = Booking.objects.get(requester=e17)
    reserve = run.actions.get(tool="reserve_room")
    assert run.status == "cancelled"
    assert run.reply == f"Cancelled; {booking.code} had already been booked and was released."
    lookup = run.events.get(kind="reconcile_lookup", action=reserve).payload
    assert lookup["status"] == "found" and lookup["receipt"]["booking_id"] == booking.code
    assert (reserve.status, reserve.attempts) == ("succeeded", 1)  # found, never run again
    assert booking.status == "cancelled"
    assert Booking.objects.filter(requester=e17).count() == 1


def test_cancel_during_a_write_whose_outcome_is_unknown_looks_it_up_and_never_retries(
    worker, e17, monkeypatch
):
    """The write times out without having run: after the cancel, the lookup proves it absent,
    so it is dropped (a cancelled run writes nothing more) instead of being run again."""
    spec = registry.get("reserve_room")
    slow = dataclasses.replace(spec.meta, estimated_latency_ms=1000)  # a 3 s timeout
    monkeypatch.setitem(registry._TOOLS, "reserve_room", dataclasses.replace(spec, meta=slow))
    run = run_start(
        user=e17, request_text=ONE_ROOM, faults=[{"tool": "reserve_room", "kind": "timeout"}]
    )
    wait_until(
        lambda: Action.objects.filter(run=run, tool="reserve_room", status="running").exists(),
        message="the reserve to start",
    )
    run = run_cancel(run_id=run.pk, user=e17)
    assert run.status == "compensating"
    run = wait_for_run(run.pk)

    reserve = run.actions.get(tool="reserve_room")
    assert (run.status, run.reply) == ("cancelled", "Cancelled; nothing was booked.")
    assert (reserve.status, reserve.attempts) == ("cancelled", 1)
    assert run.events.get(kind="reconcile_lookup", action=reserve).payload["status"] == "absent"
    assert not run.events.filter(kind="reconcile_retry").exists()
    assert not Booking.objects.exists()


def test_cancel_during_a_write_that_fails_says_nothing_was_booked(worker, e17, e23):
    run = run_start(
        user=e17,
        request_text=ONE_ROOM,
        faults=[{"tool": "reserve_room", "kind": "pause", "calls": [1]}],
    )
    wait_until(
        lambda: Action.objects.filter(run=run, tool="reserve_room", status="running").exists(),
        message="the reserve to start",
    )
    booking_reserve(
        user=e23, room_code="R7", start_at=START, end_at=END, attendees=2, idempotency_key="rival"
    )
    run = run_cancel(run_id=run.pk, user=e17)
    release_faults(run.pk)
    run = wait_for_run(run.pk)

    assert run.status == "cancelled"
    assert run.reply == "Cancelled; nothing was booked."
    assert not Booking.objects.filter(requester=e17).exists()
    assert not run.actions.filter(tool="cancel_booking").exists()


def test_cancel_in_chinese_is_worded_in_chinese(worker, e17):
    run = run_start(
        user=e17,
        request_text=f"{START:%Y 年 %-m 月 %-d 日} {START:%H:%M}-{END:%H:%M} 订 R7，3 个人",
        faults=[{"tool": "reserve_room", "kind": "pause_after_commit"}],
    )
    wait_until(lambda: Booking.objects.filter(requester=e17).exists(), message="the write")
    run_cancel(run_id=run.pk, user=e17)
    release_faults(run.pk)
    run = wait_for_run(run.pk)

    booking = Booking.objects.get(requester=e17)
    assert run.status == "cancelled" and booking.status == "cancelled"
    assert booking.code in run.reply and "已取消" in run.reply and "释放" in run.reply


def test_the_sweeper_resumes_a_rollback_a_dead_worker_left(worker, e17):
    """A worker died right after registering R7's release: nobody runs it until the sweeper
    puts it back on the queue."""
    run = AgentRun.objects.create(
        subject=e17,
        goal=TWO_ROOMS_EN,
        model_name="rules",
        delegation={"tools": ["reserve_room"], "max_writes": 2, "resources": ["R7", "R9"]},
        budgets={},
        policy_version="test",
        deadline=timezone.now() + timedelta(minutes=5),
        status="compensating",
        outcome="gave_up",
        reply="Nothing was booked.",
        turn=3,
    )
    key = f"{run.pk}:2:0"
    booking = booking_reserve(
        user=e17, room_code="R7", start_at=START, end_at=END, attendees=4, idempotency_key=key
    ).booking
    write = Action.objects.create(
        run=run,
        turn=2,
        call_index=0,
        tool="reserve_room",
        params={"room_id": "R7"},
        params_digest="x",
        readonly=False,
        status="succeeded",
        idempotency_key=key,
        compensation={"tool": "cancel_booking", "key": f"{key}:compensate"},
        result=success({"booking_id": booking.code, "room_id": "R7"}),
    )
    Action.objects.create(
        run=run,
        turn=3,
        call_index=0,
        tool="cancel_booking",
        params={"booking_id": booking.code},
        params_digest="y",
        readonly=False,
        status="queued",
        idempotency_key=f"{key}:compensate",
        compensates=write,
        task_id="enqueued",  # sent by the worker that died: never delivered
    )
    AgentRun.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(minutes=1))

    assert sweeper.sweep()["rollbacks"] == 1
    run = wait_for_run(run.pk)

    booking.refresh_from_db()
    assert (run.status, booking.status) == ("failed", "cancelled")
    assert booking.cancel_key == f"{key}:compensate"
    assert (
        run.reply == f"Nothing was booked. {booking.code} had already been booked and was released."
    )
