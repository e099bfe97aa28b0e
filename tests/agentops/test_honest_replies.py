"""Honest replies, end to end as e17 would try them: a real Celery worker, real Redis, real
PostgreSQL, the rules planner. Each request is tried in English and in Chinese; each test
asserts the whole reply, in the request's language, and what the database holds afterwards."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import dateformat, timezone, translation
from django.utils.translation import gettext

from agentops.models import AgentRun
from agentops.runtime.runs import RunRateLimited, run_start
from bookings.models import Booking, Room
from tests.bookings.factories import booking_create
from tests.conftest import SHANGHAI
from tests.workers import wait_for_run

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("rooms")]


def tomorrow(hour: int, hours: int = 1) -> tuple[datetime, datetime]:
    day = datetime.now(SHANGHAI).date() + timedelta(days=1)
    start = datetime(day.year, day.month, day.day, hour, tzinfo=SHANGHAI)
    return start, start + timedelta(hours=hours)


def state() -> tuple[list[tuple[str, str, str]], dict[str, int]]:
    """Every booking (code, room, status) and every room's schedule version."""
    bookings = sorted(Booking.objects.values_list("code", "room__code", "status"))
    versions = dict(Room.objects.values_list("code", "schedule_version"))
    return bookings, versions


def ask(user, text: str) -> AgentRun:
    run = wait_for_run(run_start(user=user, request_text=text).pk)
    assert run.language == ("zh" if any("\u4e00" <= c <= "\u9fff" for c in text) else "en")
    return run


def assert_nothing_written(run: AgentRun, before) -> None:
    assert run.status == "failed", run.reply
    assert state() == before
    assert not run.actions.filter(tool="reserve_room").exists()


# --- a named room that is not bookable --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        (
            "book R11 tomorrow 10:00-11:00 for 2 people",
            "Nothing was booked. R11 cannot be booked: it is not open for booking. Free rooms "
            "for 2 people at that time: R1, R2 and R3. Ask again naming one.",
        ),
        (
            "帮我订明天上午10点到11点的 R11，2 个人",
            "没有预订任何会议室。R11 不能预订：它不开放预订。该时段可容纳 2 人的空闲会议室："
            "R1、R2和R3。请指定其中一间再问一次。",
        ),
    ],
)
def test_a_room_that_is_not_bookable_is_named_and_free_rooms_are_offered(worker, e17, text, reply):
    before = state()
    run = ask(e17, text)

    assert run.reply == reply
    assert_nothing_written(run, before)
    found = run.actions.get(tool="find_available_rooms").result["data"]
    assert found["named_room"] == {
        "room_id": "R11",
        "exists": True,
        "bookable": False,
        "capacity": 6,
        "equipment": [],
        "free": True,
        "available": False,  # free, but not open for booking
        "version": 0,
    }


def test_the_free_rooms_offered_leave_out_taken_ones(worker, e17, e23):
    start, end = tomorrow(10)
    booking_create(requester=e23, room="R1", start_at=start, end_at=end)
    before = state()
    run = ask(e17, "book R11 tomorrow 10:00-11:00 for 2 people")

    assert run.reply.endswith(
        "Free rooms for 2 people at that time: R2, R3 and R7. Ask again naming one."
    )
    assert_nothing_written(run, before)


def test_a_named_room_that_fits_and_is_free_is_booked(worker, e17):
    run = ask(e17, "book R9 tomorrow 10:00-11:00 for 2 people")

    assert run.status == "succeeded", run.reply
    booking = Booking.objects.get()
    assert (booking.room.code, booking.requester, booking.status) == ("R9", e17, "confirmed")
    assert run.reply.startswith("Booked R9 on ") and booking.code in run.reply


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        (
            "book R9 tomorrow 10:00-11:00 for 2 people",
            "Nothing was booked. R9 is already booked at that time. Free rooms for 2 people at "
            "that time: R1, R2 and R3. Ask again naming one.",
        ),
        (
            "帮我订明天上午10点到11点的 R9，2 个人",
            "没有预订任何会议室。R9 在该时段已被预订。该时段可容纳 2 人的空闲会议室："
            "R1、R2和R3。请指定其中一间再问一次。",
        ),
    ],
)
def test_a_named_room_taken_by_someone_else_says_so(worker, e17, e23, text, reply):
    start, end = tomorrow(10)
    booking_create(requester=e23, room="R9", start_at=start, end_at=end)
    before = state()
    run = ask(e17, text)

    assert run.reply == reply
    assert_nothing_written(run, before)


def test_a_named_room_too_small_says_how_many_it_seats(worker, e17):
    before = state()
    run = ask(e17, "book R7 tomorrow 10:00-11:00 for 9 people")

    assert run.reply == (
        "Nothing was booked. R7 seats only 4 people. Free rooms for 9 people at that time: "
        "R15 and R16. Ask again naming one."
    )
    assert_nothing_written(run, before)


# --- more people than any room seats ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        (
            "book a room tomorrow 14:00-15:00 for 500 people",
            "Nothing was booked. No room seats 500 people: the largest room seats 16.",
        ),
        (
            "帮我订明天下午两点到三点的会议室，500 人",
            "没有预订任何会议室。没有能容纳 500 人的会议室：最大的会议室可容纳 16 人。",
        ),
        (
            "book a room tomorrow 14:00-15:00 for 1200 people",
            "Nothing was booked. No room seats 1200 people: the largest room seats 16.",
        ),
    ],
)
def test_more_people_than_the_largest_room_says_how_big_it_is(worker, e17, text, reply):
    before = state()
    run = ask(e17, text)

    assert run.reply == reply
    assert_nothing_written(run, before)


def test_the_largest_room_comes_from_the_database(worker, e17):
    Room.objects.create(code="R40", name="Hall", capacity=40, department="Engineering", floor=1)
    run = ask(e17, "book a room tomorrow 14:00-15:00 for 500 people")

    assert run.reply == "Nothing was booked. No room seats 500 people: the largest room seats 40."
    assert not Booking.objects.exists()


# --- a time in the past -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "template"),
    [
        (
            "book a room yesterday 10:00-11:00 for 3 people",
            "Nothing was booked. {day:%a} {day.day} {day:%b %Y}, 10:00–11:00 is in the past. "
            "Tell me a time from now on.",
        ),
        (
            "帮我订昨天上午10点到11点的会议室，3 个人",
            "没有预订任何会议室。{day.year} 年 {day.month} 月 {day.day} 日 10:00–11:00 已经过去"
            "了。请告诉我从现在起的时间。",
        ),
    ],
)
def test_a_time_in_the_past_says_it_is_past(worker, e17, text, template):
    day = datetime.now(SHANGHAI).date() - timedelta(days=1)
    before = state()
    run = ask(e17, text)

    assert run.reply == template.format(day=day)
    assert_nothing_written(run, before)
    refused = run.actions.get(tool="find_available_rooms").result
    assert refused["code"] == "start_in_past"  # the booking service said so, not the parser


def test_earlier_today_is_past_too(worker, e17):
    now = timezone.localtime(timezone.now(), SHANGHAI)
    if now.hour < 1:
        pytest.skip("no whole hour of today has passed yet")
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    before = state()
    run = ask(e17, f"book a room today {start:%H:%M}-{start + timedelta(hours=1):%H:%M} for 2")

    assert "is in the past. Tell me a time from now on." in run.reply
    assert_nothing_written(run, before)


# --- what the assistant does not do -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        (
            "cancel all my meetings",
            "Cancel {code}: R9, {day} 10:00–11:00, 1 person? Say yes to cancel it?",
        ),
        ("取消我所有的会议", "取消 {code}：R9，{day} 10:00–11:00，1 人？确认取消请回复“好的”？"),
    ],
)
def test_cancelling_without_naming_a_booking_lists_it_and_asks_first(worker, e17, text, reply):
    start, end = tomorrow(10)
    held = booking_create(requester=e17, room="R9", start_at=start, end_at=end)
    before = state()
    run = ask(e17, text)
    language = "zh-hans" if "取消" in text else "en"
    with translation.override(language):
        day = dateformat.format(start, gettext("D j M Y"))

    assert run.reply == reply.format(code=held.code, day=day)
    assert run.outcome == "ask_user"
    assert state() == before  # still confirmed: nothing was cancelled
    assert not run.actions.filter(readonly=False).exists()


def test_moving_a_booking_names_it_and_changes_it_through_change_booking(worker, e17):
    start, end = tomorrow(10)
    booking = booking_create(requester=e17, room="R9", start_at=start, end_at=end)
    run = ask(e17, "move my 10:00 meeting tomorrow to R7")

    assert run.status == "succeeded", run.reply
    assert run.delegation["max_writes"] == 1
    assert run.delegation["resource"] == "R7"
    booking.refresh_from_db()
    assert booking.room.code == "R7"
    assert (booking.during.lower, booking.during.upper) == (start, end)
    assert Booking.objects.count() == 1
    assert run.reply.startswith(f"Moved booking {booking.code} to R7 on ")


@pytest.mark.parametrize(
    ("text", "opening"),
    [
        ("move my 10:00 meeting tomorrow to R7", "Nothing was changed; the booking is as it was."),
        ("把明天上午10点的会议改到R7", "没有做任何更改，预订保持原样。"),
    ],
)
def test_a_move_into_a_taken_room_says_nothing_was_changed_not_booked(
    worker, e17, e23, text, opening
):
    """The move was allowed and did not happen: the reply says what the person asked about
    (the booking is unchanged), not that nothing was booked."""
    start, end = tomorrow(10)
    booking = booking_create(requester=e17, room="R9", start_at=start, end_at=end)
    booking_create(requester=e23, room="R7", start_at=start, end_at=end)
    before = state()
    run = ask(e17, text)

    assert run.status == "failed", run.reply
    assert run.reply.startswith(opening), run.reply
    assert "Nothing was booked" not in run.reply and "没有预订" not in run.reply
    assert state() == before
    booking.refresh_from_db()
    assert booking.room.code == "R9"


def test_moving_a_booking_to_where_it_already_is_asks_and_changes_nothing(worker, e17):
    start, end = tomorrow(10)
    booking_create(requester=e17, room="R9", start_at=start, end_at=end)
    before = state()
    run = ask(e17, "move my 10:00 meeting tomorrow to R9")

    assert run.reply == ("That is when and where the booking already is. To when should I move it?")
    assert state() == before
    assert not run.actions.filter(readonly=False).exists()
    assert run.delegation["max_writes"] == 0


# --- a room already held at that time ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        (
            "book a room tomorrow 10:00-11:00 for 2 people",
            "Nothing was booked. You already have R9 (booking {code}, 10:00–11:00) at this "
            "time. I booked nothing, so that you do not hold two rooms at once. If you need "
            'another room as well, ask again and say "another room".',
        ),
        (
            "帮我订明天上午10点到11点的会议室，2 个人",
            "没有预订任何会议室。你在该时段已有 R9（预订 {code}，10:00–11:00）。为免你同时占用"
            "两间会议室，本次没有预订。如果确实还需要一间，请再说一次并注明“再订一间”。",
        ),
    ],
)
def test_a_room_already_held_at_that_time_is_named_and_nothing_is_booked(worker, e17, text, reply):
    start, end = tomorrow(10)
    held = booking_create(requester=e17, room="R9", start_at=start, end_at=end, attendees=2)
    before = state()
    run = ask(e17, text)

    assert run.reply == reply.format(code=held.code)
    assert_nothing_written(run, before)
    assert run.outcome == "ask_user"


def test_a_room_held_at_another_time_does_not_stand_in_the_way(worker, e17):
    start, end = tomorrow(12)
    booking_create(requester=e17, room="R9", start_at=start, end_at=end, attendees=2)
    run = ask(e17, "book a room tomorrow 10:00-11:00 for 2 people")

    assert run.status == "succeeded", run.reply
    assert Booking.objects.filter(requester=e17, status="confirmed").count() == 2


@pytest.mark.parametrize(
    "text",
    [
        "book another room tomorrow 10:00-11:00 for 2 people",
        "再订一间明天上午10点到11点的会议室，2 个人",
    ],
)
def test_another_room_asked_for_is_booked_beside_the_one_held(worker, e17, text):
    start, end = tomorrow(10)
    held = booking_create(requester=e17, room="R9", start_at=start, end_at=end, attendees=2)
    run = ask(e17, text)

    assert run.status == "succeeded", run.reply
    second = Booking.objects.exclude(pk=held.pk).get()
    assert (second.room.code, second.requester, second.status) == ("R1", e17, "confirmed")
    assert second.code in run.reply and "R1" in run.reply


# --- a booking for someone else ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        (
            "book a room for e23 tomorrow 10:00-11:00 for 2 people",
            "I book rooms only for the person asking, so I booked nothing for E23. If the room is "
            "for you, could you ask again without naming E23?",
        ),
        (
            "帮 e23 订明天上午10点到11点的会议室，2 个人",
            "我只为提出请求的人预订会议室，所以没有为 E23 预订任何会议室。如果会议室是你自己用，"
            "能不提 E23 再说一次吗？",
        ),
    ],
)
def test_a_booking_for_someone_else_is_refused_and_says_why(worker, e17, e23, text, reply):
    before = state()
    run = ask(e17, text)

    assert run.reply == reply
    assert_nothing_written(run, before)
    assert run.delegation["max_writes"] == 0  # the request granted no write at all
    assert not Booking.objects.filter(requester__in=[e17, e23]).exists()


# --- a room that does not exist ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        (
            "book R9999 tomorrow 10:00-11:00 for 2 people",
            "Nothing was booked. There is no room R9999. Free rooms for 2 people at that time: "
            "R1, R2 and R3. Ask again naming one.",
        ),
        (
            "帮我订明天上午10点到11点的 R9999，2 个人",
            "没有预订任何会议室。会议室 R9999 不存在。该时段可容纳 2 人的空闲会议室："
            "R1、R2和R3。请指定其中一间再问一次。",
        ),
    ],
)
def test_a_room_that_does_not_exist_says_so(worker, e17, text, reply):
    before = state()
    run = ask(e17, text)

    assert run.reply == reply
    assert_nothing_written(run, before)
    assert run.actions.get().result["data"]["named_room"]["exists"] is False


# --- the rate limit ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        (
            "book a room tomorrow 10:00-11:00 for 2 people",
            "You sent too many requests this minute. Try again in {s} seconds.",
        ),
        ("帮我订明天上午10点到11点的会议室，2 个人", "你这一分钟内的请求太多了，请 {s} 秒后再试。"),
    ],
)
def test_a_run_refused_by_the_rate_limit_answers_in_the_request_language(
    worker, e17, settings, text, reply
):
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 0
    runs, before = AgentRun.objects.count(), state()
    with pytest.raises(RunRateLimited) as refused:
        run_start(user=e17, request_text=text)

    assert refused.value.reply == reply.format(s=refused.value.retry_after_s)
    assert 1 <= refused.value.retry_after_s <= 60
    assert (AgentRun.objects.count(), state()) == (runs, before)


@pytest.mark.parametrize(
    ("text", "reply", "language"),
    [
        (
            "book a room tomorrow 10:00-11:00 for 2 people",
            "You sent too many requests this minute. Try again in {s} seconds.",
            "en",
        ),
        (
            "帮我订明天上午10点到11点的会议室，2 个人",
            "你这一分钟内的请求太多了，请 {s} 秒后再试。",
            "zh",
        ),
    ],
)
def test_the_api_answers_a_rate_limited_start_in_the_request_language(
    worker, e17, client, settings, text, reply, language
):
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 0
    client.force_login(e17)
    runs, before = AgentRun.objects.count(), state()
    response = client.post(
        "/api/runs", {"request": text}, content_type="application/json", HTTP_ACCEPT_LANGUAGE="en"
    )

    assert response.status_code == 429
    seconds = int(response["Retry-After"])
    assert response.json() == {
        "error": {"code": "rate_limited", "message": reply.format(s=seconds)}
    }
    assert response["Content-Language"] == language
    assert (AgentRun.objects.count(), state()) == (runs, before)


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        (
            "book a room tomorrow 10:00-11:00 for 2 people",
            "Nothing was booked. You sent too many requests this minute. Try again in {s} seconds.",
        ),
        (
            "帮我订明天上午10点到11点的会议室，2 个人",
            "没有预订任何会议室。你这一分钟内的请求太多了，请 {s} 秒后再试。",
        ),
    ],
)
def test_a_run_whose_calls_are_rate_limited_says_so_in_its_language(
    worker, e17, settings, text, reply
):
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 0
    before = state()
    run = ask(e17, text)

    refused = run.actions.get()  # refused once, not retried into the same wall
    assert (refused.tool, refused.status, refused.result["reason"]) == (
        "find_available_rooms",
        "rejected",
        "rate_limited",
    )
    seconds = -(-refused.result["retry_after_ms"] // 1000)
    assert run.reply == reply.format(s=seconds)
    assert_nothing_written(run, before)
