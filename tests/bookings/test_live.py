"""The day view's and My bookings' live pokes: a consumer listens to its group before it joins
it, so a committed change reaches an open page; a poke to a group nobody listens to is not sent
at all (it cost the worker a turn of the channel layer for every reservation)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import date, timedelta

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import transaction
from django.test import Client

from agentops.contract import broadcast, broadcast_listen, broadcast_unlisten
from agentops.runtime.redis_client import get_redis
from agentops.runtime.trace import _watch_key
from bookings.live import CHANGED, day_group, room_group, schedule_changed
from bookings.notices import Notice, push_changed, user_group
from bookings.series import SeriesMode, series_cancel, series_reserve
from bookings.services import booking_request
from config.asgi import application
from tests.conftest import slot

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ORIGIN = (b"origin", b"http://127.0.0.1:8000")  # settings.WEBSOCKET_ALLOWED_ORIGINS


def session_headers(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), ORIGIN]


def _committed(fn, *args, **kwargs) -> None:
    with transaction.atomic():
        fn(*args, **kwargs)


def _listened(group: str) -> bool:
    return bool(get_redis().exists(_watch_key(group)))


def test_an_open_day_view_hears_a_change_and_stops_listening_when_closed(e17):
    start, end = slot(days=3, hour=10)
    day = day_group(date.fromisoformat(start.isoformat()[:10]))
    headers = session_headers(e17)

    async def scenario() -> tuple[str, bool, bool]:
        path = f"/ws/schedule/?day={start.isoformat()[:10]}"
        comm = WebsocketCommunicator(application, path, headers=headers)
        connected, _ = await comm.connect(timeout=5)
        assert connected
        listening = await asyncio.to_thread(_listened, day)
        await database_sync_to_async(_committed)(schedule_changed, [("R7", start, end)])
        heard = await comm.receive_from(timeout=5)
        await comm.disconnect()
        return heard, listening, await asyncio.to_thread(_listened, day)

    heard, listening, after = asyncio.run(scenario())
    assert listening and heard == CHANGED
    assert not after


def test_open_my_bookings_hears_its_notice(e17):
    headers = session_headers(e17)

    async def scenario() -> dict:
        comm = WebsocketCommunicator(application, "/ws/bookings/", headers=headers)
        connected, _ = await comm.connect(timeout=5)
        assert connected
        await database_sync_to_async(_committed)(push_changed, user_id=e17.pk, notice=Notice.BOOKED)
        heard = json.loads(await comm.receive_from(timeout=5))
        await comm.disconnect()
        return heard

    assert asyncio.run(scenario()) == {"changed": True, "notice": "booked"}
    assert not _listened(user_group(e17.pk))


def test_a_poke_nobody_listens_to_is_not_sent():
    """A channel in two groups, listening to one: only that group's poke arrives."""
    heard_group, silent_group = room_group("R7"), room_group("R8")

    async def scenario() -> list[dict]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        for group in (silent_group, heard_group):
            await layer.group_add(group, channel)

        await asyncio.to_thread(broadcast_listen, heard_group, channel)
        try:
            broadcast(silent_group, {"type": "schedule.changed", "group": "silent"})
            broadcast(heard_group, {"type": "schedule.changed", "group": "heard"})
            received = [await asyncio.wait_for(layer.receive(channel), 5)]
            with pytest.raises(TimeoutError):
                received.append(await asyncio.wait_for(layer.receive(channel), 1))
        finally:
            await asyncio.to_thread(broadcast_unlisten, heard_group, channel)
        return received

    received = asyncio.run(scenario())
    assert [m["group"] for m in received] == ["heard"]


async def _heard(comm: WebsocketCommunicator) -> str:
    """The next message of an open socket (fails the test after 5 s)."""
    return await comm.receive_from(timeout=5)


def test_a_series_and_its_cancel_poke_the_open_day_views_and_room_weeks(e17, rooms):
    """Series writes change several days of a room at once: each day's open view re-reads
    (they sent nothing, so an open day view kept showing the slots free, or taken)."""
    start, end = slot(days=3, hour=10)
    second_day = (start + timedelta(days=7)).date().isoformat()
    headers = session_headers(e17)

    async def scenario() -> list[str]:
        day = WebsocketCommunicator(application, f"/ws/schedule/?day={second_day}", headers=headers)
        week = WebsocketCommunicator(application, "/ws/schedule/?room=R7", headers=headers)
        assert (await day.connect(timeout=5))[0] and (await week.connect(timeout=5))[0]
        heard = []
        reserved = await database_sync_to_async(series_reserve)(
            user=e17,
            room_code="R7",
            start_at=start,
            end_at=end,
            rule="FREQ=WEEKLY;COUNT=3",
            attendees=2,
            mode=SeriesMode.ALL,
            idempotency_key="series-live",
        )
        heard += [await _heard(day), await _heard(week)]
        await database_sync_to_async(series_cancel)(
            user=e17,
            series_id=reserved.series.pk,
            from_booking=reserved.booked[1].code,
            idempotency_key="series-live-cancel",
        )
        heard += [await _heard(day), await _heard(week)]
        await day.disconnect()
        await week.disconnect()
        return heard

    assert asyncio.run(scenario()) == [CHANGED] * 4


def test_a_request_that_waits_for_an_approver_reaches_open_my_bookings(e17, rooms):
    """My bookings shows the request among those that need approval without a reload (it
    heard of decisions only, so a new request appeared after a reload)."""
    start, end = slot(days=3, hour=10)
    headers = session_headers(e17)

    async def scenario() -> tuple[str, dict]:
        comm = WebsocketCommunicator(application, "/ws/bookings/", headers=headers)
        assert (await comm.connect(timeout=5))[0]
        outcome = await database_sync_to_async(booking_request)(
            user=e17,
            room_code="R16",
            start_at=start,
            end_at=end,
            attendees=2,
            idempotency_key=str(uuid.uuid4()),
        )
        heard = json.loads(await _heard(comm))
        await comm.disconnect()
        return outcome.kind, heard

    assert asyncio.run(scenario()) == ("pending", {"changed": True, "notice": "requested"})


def test_a_no_show_release_pokes_the_open_day_view(e17, rooms):
    """The sweeper releasing a booking nobody checked in to frees its slot: an open day view of
    that day re-reads (it kept showing the slot taken)."""
    from bookings.checkin import bookings_release_no_shows
    from bookings.models import Room
    from tests.bookings.factories import booking_create

    Room.objects.filter(code="R7").update(checkin_required=True)
    start, end = slot(days=3, hour=10)
    booking_create(requester=e17, room="R7", start_at=start, end_at=end)
    headers = session_headers(e17)

    async def scenario() -> tuple[str, list[str]]:
        day = WebsocketCommunicator(
            application, f"/ws/schedule/?day={start.date().isoformat()}", headers=headers
        )
        assert (await day.connect(timeout=5))[0]
        released = await database_sync_to_async(bookings_release_no_shows)(
            now=start + timedelta(hours=1)
        )
        heard = await _heard(day)
        await day.disconnect()
        return heard, released.codes

    heard, codes = asyncio.run(scenario())
    assert len(codes) == 1
    assert heard == CHANGED
