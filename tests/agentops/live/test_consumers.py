"""The live trace websocket: session-authenticated, the owner's runs only, catch-up from the
database, then live pushes through the real Redis channel layer."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentops import selectors
from agentops.live import consumers
from agentops.models import Action, AgentRun, TraceEvent
from agentops.runtime import trace
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.redis_client import get_redis
from agentops.runtime.runs import run_start
from agentops.runtime.trace import event_json, run_group, trace_append
from agentops.runtime.trace import unwatch as trace_unwatch
from agentops.runtime.trace import watch as trace_watch
from approvals.models import ApprovalRequest
from config.asgi import application
from tests.accounts.factories import APPROVERS, EMPLOYEES, user_create
from tests.agentops.factories import run_create
from tests.conftest import ENG, slot
from tests.workers import release_faults, wait_for_run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]

START, END = slot(days=7)
REQUEST = f"book a room on {START:%Y-%m-%d} {START:%H:%M}-{END:%H:%M} for 3 people with a projector"
ORIGIN = (b"origin", b"http://127.0.0.1:8000")  # settings.WEBSOCKET_ALLOWED_ORIGINS


def session_headers(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), ORIGIN]


async def connect(path: str, headers) -> tuple[WebsocketCommunicator, bool, object]:
    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, detail = await comm.connect(timeout=5)
    return comm, connected, detail


async def receive_until(comm: WebsocketCommunicator, kind: str, timeout: float = 20) -> list[dict]:
    events = []
    while True:
        event = json.loads(await comm.receive_from(timeout=timeout))
        events.append(event)
        if event["kind"] == kind:
            return events


def finished_run(user) -> AgentRun:
    tool_call_governed(user=user, name="list_my_bookings", arguments={})
    return AgentRun.objects.get(subject=user)


async def watch(run_id, headers) -> int | str:
    """What the socket answers: "watching" (the first event arrived), the close code after
    accept, or "refused" (the handshake itself refused)."""
    comm, connected, _ = await connect(f"/ws/runs/{run_id}/", headers)
    if not connected:
        return "refused"
    output = await comm.receive_output(timeout=5)
    await comm.disconnect()
    if output["type"] == "websocket.close":
        return output["code"]
    return "watching"


def waiting_for_approval(user) -> AgentRun:
    run = run_start(
        user=user, request_text=f"book R16 on {START:%Y-%m-%d} 10:00-11:00 for 4 people"
    )
    return wait_for_run(run.pk, statuses=("waiting_approval",))


def test_who_may_watch_a_run(worker, e17, e23, approver, admin_user):
    """The owner, an approver who may decide one of its pending requests, and admins; anyone
    else reads the run as absent (4404), no session is 4401, a foreign Origin never connects."""
    other_approver = user_create("a02", department=ENG, roles=[EMPLOYEES, APPROVERS])
    pending = waiting_for_approval(e17)
    plain = finished_run(e23)
    foreign = [h for h in session_headers(e17) if h[0] != b"origin"] + [
        (b"origin", b"https://evil.example")
    ]
    cases = {
        "owner": (pending, session_headers(e17)),
        "other employee": (pending, session_headers(e23)),
        "approver, pending request on the run": (pending, session_headers(approver)),
        "approver, no pending request on the run": (plain, session_headers(other_approver)),
        "admin": (pending, session_headers(admin_user)),
        "admin, a run without approvals": (plain, session_headers(admin_user)),
        "anonymous": (pending, [ORIGIN]),
        "foreign origin": (pending, foreign),
        "no such run": (uuid.uuid4(), session_headers(e17)),
    }

    async def scenario():
        return {
            name: await watch(getattr(run, "pk", run), headers)
            for name, (run, headers) in cases.items()
        }

    assert asyncio.run(scenario()) == {
        "owner": "watching",
        "other employee": 4404,
        "approver, pending request on the run": "watching",
        "approver, no pending request on the run": 4404,
        "admin": "watching",
        "admin, a run without approvals": "watching",
        "anonymous": 4401,
        "foreign origin": "refused",
        "no such run": 4404,
    }


def test_an_approver_no_longer_watches_once_the_request_is_decided(worker, e17, approver):
    pending = waiting_for_approval(e17)
    request = ApprovalRequest.objects.get(run_ref=str(pending.pk))
    ApprovalRequest.objects.filter(pk=request.pk).update(status="rejected")
    headers = session_headers(approver)
    assert asyncio.run(watch(pending.pk, headers)) == 4404


@pytest.mark.django_db(transaction=True)
def test_a_foreign_origin_is_refused(e17):
    run = finished_run(e17)
    headers = [h for h in session_headers(e17) if h[0] != b"origin"] + [
        (b"origin", b"https://evil.example")
    ]

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        await comm.disconnect()
        return connected

    assert asyncio.run(scenario()) is False


@pytest.mark.django_db(transaction=True)
def test_connecting_sends_what_the_page_missed_from_the_database(e17):
    run = finished_run(e17)
    headers = session_headers(e17)

    async def scenario(after: int):
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/?after={after}", headers)
        assert connected
        events = await receive_until(comm, "run_finished")
        assert await comm.receive_nothing(timeout=0.3)
        await comm.disconnect()
        return [(e["seq"], e["kind"]) for e in events]

    assert asyncio.run(scenario(0)) == [
        (1, "gate"),
        (2, "execution_started"),
        (3, "execution_finished"),
        (4, "run_finished"),
    ]
    assert asyncio.run(scenario(2)) == [(3, "execution_finished"), (4, "run_finished")]


def test_a_running_run_streams_live_in_order_without_repeats(worker, e17):
    run = run_start(
        user=e17, request_text=REQUEST, faults=[{"tool": "find_available_rooms", "kind": "pause"}]
    )
    wait_until(
        lambda: Action.objects.filter(run=run, status="running").exists(), message="search running"
    )
    headers = session_headers(e17)

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        assert connected
        backlog = [json.loads(await comm.receive_from(timeout=5)) for _ in range(4)]
        release_faults(run.pk)  # from here on, events arrive as the worker commits them
        live = await receive_until(comm, "run_finished")
        await comm.disconnect()
        return backlog + live

    events = asyncio.run(scenario())
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert seqs[-1] == run.events.count()
    assert events[-1]["payload"]["reply"] == run.reply


def test_events_committed_while_disconnected_arrive_once_in_order_on_reconnect(worker, e17):
    run = run_start(
        user=e17, request_text=REQUEST, faults=[{"tool": "find_available_rooms", "kind": "pause"}]
    )
    wait_until(
        lambda: Action.objects.filter(run=run, status="running").exists(), message="search running"
    )
    headers = session_headers(e17)

    async def first_visit():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        assert connected
        seen = [json.loads(await comm.receive_from(timeout=5)) for _ in range(4)]
        await comm.disconnect()
        return seen

    async def second_visit(after: int):
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/?after={after}", headers)
        assert connected
        seen = await receive_until(comm, "run_finished")
        assert await comm.receive_nothing(timeout=0.3)
        await comm.disconnect()
        return seen

    before = asyncio.run(first_visit())
    release_faults(run.pk)  # the run goes on and finishes while nobody watches
    assert wait_for_run(run.pk).status == "succeeded"
    after = asyncio.run(second_visit(before[-1]["seq"]))
    seqs = [e["seq"] for e in before + after]
    assert seqs == list(range(1, run.events.count() + 1))
    assert [e["kind"] for e in after] == list(
        run.events.filter(seq__gt=before[-1]["seq"]).order_by("seq").values_list("kind", flat=True)
    )


def test_a_socket_gets_no_events_of_other_runs(worker, e17, e23):
    mine = run_start(
        user=e17, request_text=REQUEST, faults=[{"tool": "find_available_rooms", "kind": "pause"}]
    )
    start, end = slot(days=8)
    theirs = run_start(
        user=e23,
        request_text=f"book a room on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 2 people",
        faults=[{"tool": "find_available_rooms", "kind": "pause"}],
    )
    wait_until(
        lambda: Action.objects.filter(run=mine, status="running").exists(), message="search running"
    )
    headers = session_headers(e17)

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{mine.pk}/", headers)
        assert connected
        release_faults(theirs.pk)  # their run pushes while mine is open
        await database_sync_to_async(wait_for_run)(theirs.pk)  # its session back to the pool
        release_faults(mine.pk)
        events = await receive_until(comm, "run_finished")
        assert await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()
        return events

    events = asyncio.run(scenario())
    assert events == [event_json(e) for e in mine.events.order_by("seq")]
    assert theirs.events.count() > 0


@pytest.mark.django_db(transaction=True)
def test_the_card_form_sends_server_rendered_fragments_in_the_page_language(e17):
    run = finished_run(e17)
    headers = session_headers(e17)

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/?format=html&lang=en", headers)
        assert connected
        fragments = [await comm.receive_from(timeout=5) for _ in range(4)]
        await comm.disconnect()
        return fragments

    fragments = asyncio.run(scenario())
    assert all('hx-swap-oob="beforeend"' in f for f in fragments)
    assert 'data-seq="1" data-kind="gate"' in fragments[0]
    assert 'data-last-seq="4"' in fragments[3]
    assert 'data-kind="run_finished"' in fragments[3]
    assert 'id="run-reply"' in fragments[3]


async def next_gates(layer, channel, timeout: float = 5) -> list[dict]:
    """The gate events of the next push that has any. A run's own run_started (committed by
    run_create, before the test watches) may be pushed late on a busy machine, once the watch
    is up: that push is not what these tests are about, so it is passed over."""

    async def gates():
        while True:
            events = [e for e in (await layer.receive(channel))["events"] if e["kind"] == "gate"]
            if events:
                return events

    return await asyncio.wait_for(gates(), timeout)


@pytest.mark.django_db(transaction=True)
def test_only_a_watched_run_is_pushed(e17):
    """A run nobody watches costs no push; once watched, its events are pushed; once the last
    watcher has gone, they are not any more. (The database holds every event either way.)"""
    watched, unwatched = run_create(e17, status="running"), run_create(e17, status="running")

    async def scenario():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        for run in (watched, unwatched):
            await layer.group_add(run_group(run.pk), channel)
        await asyncio.to_thread(trace_watch, run_group(watched.pk), channel)
        for run, name in ((unwatched, "unwatched"), (watched, "watched")):  # in this order
            await database_sync_to_async(trace_append)(run=run, kind="gate", payload={"run": name})
        pushed = await next_gates(layer, channel)
        await asyncio.to_thread(trace_unwatch, run_group(watched.pk), channel)
        await database_sync_to_async(trace_append)(
            run=watched, kind="gate", payload={"run": "gone"}
        )
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(layer.receive(channel), 1)
        return pushed

    pushed = asyncio.run(scenario())
    assert [e["seq"] for e in pushed] == [2]
    assert pushed[0]["payload"] == {"run": "watched"}
    assert {e.run_id for e in TraceEvent.objects.filter(kind="gate")} == {watched.pk, unwatched.pk}
    assert watched.events.count() == 3


@pytest.mark.django_db(transaction=True)
def test_the_push_thread_goes_on_after_a_failed_check(e17, monkeypatch):
    """A Redis error in one batch's check loses that push (readers catch up from the
    database), not the pushes after it."""
    run = run_create(e17, status="running")
    real, failures = trace._watched, []

    def flaky(batches):
        if any(e["payload"] == {"n": "lost"} for events in batches.values() for e in events):
            failures.append(batches)
            raise ConnectionError("redis went away")
        return real(batches)

    monkeypatch.setattr(trace, "_watched", flaky)

    async def scenario():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(run_group(run.pk), channel)
        await asyncio.to_thread(trace_watch, run_group(run.pk), channel)
        await database_sync_to_async(trace_append)(run=run, kind="gate", payload={"n": "lost"})
        await asyncio.sleep(0.5)
        await database_sync_to_async(trace_append)(run=run, kind="gate", payload={"n": "after"})
        return await next_gates(layer, channel)

    pushed = asyncio.run(scenario())
    assert failures
    assert [e["payload"] for e in pushed] == [{"n": "after"}]


@pytest.mark.django_db(transaction=True)
def test_an_event_whose_push_was_lost_still_reaches_the_open_socket(e17, monkeypatch):
    """A card waiting for an approver hears nothing more until the approver decides: a push
    lost on the way must not leave it stale until then. The open socket looks in the database
    itself; what it sends there and what is pushed after arrive once each, in order."""
    run = run_create(e17, status="running")
    headers = session_headers(e17)
    monkeypatch.setattr(consumers, "RESYNC_FIRST_S", 0.5)
    real_send = trace._pusher.send

    def lossy(group, event):
        if event["payload"] != {"n": "lost"}:
            real_send(group, event)

    monkeypatch.setattr(trace._pusher, "send", lossy)

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/?after=1", headers)
        assert connected
        await database_sync_to_async(trace_append)(run=run, kind="gate", payload={"n": "lost"})
        lost = json.loads(await comm.receive_from(timeout=5))  # never pushed: read by the socket
        await database_sync_to_async(trace_append)(run=run, kind="gate", payload={"n": "pushed"})
        pushed = json.loads(await comm.receive_from(timeout=5))
        nothing_more = await comm.receive_nothing(timeout=1.5)  # the resync looks again: no repeat
        await comm.disconnect()
        return lost, pushed, nothing_more

    lost, pushed, nothing_more = asyncio.run(scenario())
    assert (lost["seq"], lost["payload"]) == (2, {"n": "lost"})
    assert (pushed["seq"], pushed["payload"]) == (3, {"n": "pushed"})
    assert nothing_more


@pytest.mark.django_db(transaction=True)
def test_a_socket_that_hears_nothing_looks_less_often(e17, monkeypatch):
    """The socket's own looks in the database double in interval while they find nothing, up
    to the maximum: an idle card waiting half an hour costs a read a minute, not one in five
    seconds."""
    run = finished_run(e17)
    headers = session_headers(e17)
    monkeypatch.setattr(consumers, "RESYNC_FIRST_S", 0.2)
    monkeypatch.setattr(consumers, "RESYNC_MAX_S", 0.8)
    real, looks = selectors.run_events_after, []

    def reading(**kwargs):
        looks.append(kwargs["after"])
        return real(**kwargs)

    monkeypatch.setattr(selectors, "run_events_after", reading)

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        assert connected
        await receive_until(comm, "run_finished", timeout=5)
        await asyncio.sleep(3.5)  # looks at 0.2, 0.6, 1.4, 2.2, 3.0 s after the connect
        await comm.disconnect()
        looked = len(looks)
        await asyncio.sleep(1)  # none once it is closed
        return looked

    looked = asyncio.run(scenario())
    # 1 read at connect, then 5 if the intervals double to the cap, 17 had they stayed at 0.2 s.
    # On a busy machine a look may come late, never early: fewer, never more.
    assert 3 <= looked <= 6, looks
    assert len(looks) == looked
    assert set(looks) == {0, 4}  # the connect read from 0, every look after the last event sent


@pytest.mark.django_db(transaction=True)
def test_a_socket_marks_its_run_before_it_reads_the_database(e17, monkeypatch):
    run = finished_run(e17)
    headers = session_headers(e17)
    key = f"agentops:watchers:{run_group(run.pk)}"
    real, marked = selectors.run_events_after, []

    def reading(**kwargs):
        marked.append(bool(get_redis().exists(key)))
        return real(**kwargs)

    monkeypatch.setattr(selectors, "run_events_after", reading)

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        assert connected
        await comm.receive_from(timeout=5)
        await comm.disconnect()

    asyncio.run(scenario())
    assert marked == [True]


@pytest.mark.django_db(transaction=True)
def test_an_open_socket_marks_its_run_watched_until_it_closes(e17):
    run = finished_run(e17)
    headers = session_headers(e17)
    key = f"agentops:watchers:{run_group(run.pk)}"

    async def scenario():
        first, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        second, also, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        assert connected and also
        await first.receive_from(timeout=5)
        await second.receive_from(timeout=5)
        both = get_redis().scard(key)
        await first.disconnect()
        one = get_redis().scard(key)
        await second.disconnect()
        return both, one

    assert asyncio.run(scenario()) == (2, 1)
    assert not get_redis().exists(key)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ({"bytes": b"\x00\x01binary"}, 1003),
        ({"text": "not json"}, 1007),
        ({"text": '{"a": '}, 1007),
        ({"text": "[" * 100_000}, 1009),
        ({"text": json.dumps({"pad": "x" * 5000})}, 1009),
        ({"text": "\ud800"}, 1007),
    ],
    ids=["binary", "not-json", "cut-json", "deep-and-big", "oversized-json", "lone-surrogate"],
)
def test_a_frame_that_is_not_small_json_closes_the_socket_and_unmarks_the_run(e17, frame, code):
    run = finished_run(e17)
    headers = session_headers(e17)
    key = f"agentops:watchers:{run_group(run.pk)}"

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        assert connected
        await receive_until(comm, "run_finished", timeout=5)  # up and marked
        marked = get_redis().scard(key)
        await comm.send_input({"type": "websocket.receive", **frame})
        closed = await comm.receive_output(timeout=5)
        await comm.wait(5)  # the consumer ended, raising nothing
        return marked, closed

    marked, closed = asyncio.run(scenario())
    assert marked == 1
    assert closed == {"type": "websocket.close", "code": code}
    assert not get_redis().exists(key)


@pytest.mark.django_db(transaction=True)
def test_a_small_json_frame_is_ignored_and_the_stream_goes_on(e17):
    run = finished_run(e17)
    headers = session_headers(e17)

    async def scenario():
        comm, connected, _ = await connect(f"/ws/runs/{run.pk}/", headers)
        assert connected
        await receive_until(comm, "run_finished", timeout=5)
        await comm.send_json_to({"cancel": True, "run": str(run.pk)})
        quiet = await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()
        return quiet

    assert asyncio.run(scenario()) is True
    assert AgentRun.objects.get(pk=run.pk).status == run.status
