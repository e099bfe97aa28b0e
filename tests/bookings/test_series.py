from __future__ import annotations

import uuid
from datetime import date, datetime, timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from bookings.errors import BookingError
from bookings.models import Booking, BookingSeries, BookingStatus, Room, SeriesCancellation
from bookings.recurrence import MAX_OCCURRENCES, Frequency, occurrences, rule_build
from bookings.series import (
    SeriesMode,
    series_cancel,
    series_cancel_request,
    series_preview,
    series_request,
    series_reserve,
)
from tests.bookings.factories import booking_create
from tests.conftest import SHANGHAI, slot

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rooms")]


def _state() -> tuple[int, int, list[int]]:
    return (
        Booking.objects.count(),
        BookingSeries.objects.count(),
        list(Room.objects.order_by("code").values_list("schedule_version", flat=True)),
    )


def refused(reason: str, code: str, fn, **kwargs) -> BookingError:
    before = _state()
    with pytest.raises(BookingError) as info:
        fn(**kwargs)
    assert (info.value.reason, info.value.code) == (reason, code), info.value
    assert _state() == before
    return info.value


def weekly(count=4, interval=1, start=None):
    start = start or slot(days=1)[0]
    return rule_build(frequency=Frequency.WEEKLY, first_start=start, interval=interval, count=count)


def reserve(user, *, rule, mode=SeriesMode.ALL, room="R7", window=None, key=None, **kw):
    start, end = window or slot(days=1)
    return series_reserve(
        user=user,
        room_code=room,
        start_at=start,
        end_at=end,
        rule=rule,
        attendees=3,
        mode=mode,
        idempotency_key=key or f"k-{uuid.uuid4()}",
        **kw,
    )


# --- rules ----------------------------------------------------------------------------------


def test_every_two_weeks_keeps_the_wall_clock_time():
    start, end = slot(days=1, hour=9)
    rule = rule_build(frequency=Frequency.WEEKLY, first_start=start, interval=2, count=3)
    assert rule == "FREQ=WEEKLY;INTERVAL=2;COUNT=3"
    found = occurrences(rule=rule, first_start=start, duration=end - start)
    assert [o.start_at - start for o in found] == [timedelta(0), timedelta(14), timedelta(28)]
    assert all(timezone.localtime(o.start_at).hour == 9 for o in found)
    assert all(o.end_at - o.start_at == timedelta(hours=1) for o in found)


def test_monthly_by_weekday_is_the_same_nth_weekday():
    start = datetime(2031, 3, 11, 10, 0, tzinfo=SHANGHAI)  # 2nd Tuesday
    rule = rule_build(frequency=Frequency.MONTHLY_WEEKDAY, first_start=start, count=3)
    assert rule == "FREQ=MONTHLY;BYDAY=2TU;COUNT=3"
    found = occurrences(rule=rule, first_start=start, duration=timedelta(hours=1))
    assert [o.start_at.date() for o in found] == [
        date(2031, 3, 11),
        date(2031, 4, 8),
        date(2031, 5, 13),
    ]


def test_until_a_date_includes_that_day():
    start, _ = slot(days=1)
    last = (start + timedelta(days=4)).date()
    rule = rule_build(frequency=Frequency.DAILY, first_start=start, until=last)
    found = occurrences(rule=rule, first_start=start, duration=timedelta(hours=1))
    assert len(found) == 5
    assert found[-1].start_at.date() == last


def test_more_than_a_hundred_occurrences_is_refused():
    start, _ = slot(days=1)
    with pytest.raises(BookingError, match="at most 100"):
        rule_build(frequency=Frequency.DAILY, first_start=start, count=MAX_OCCURRENCES + 1)
    with pytest.raises(BookingError, match="at most 100"):
        occurrences(rule="FREQ=DAILY;COUNT=101", first_start=start, duration=timedelta(hours=1))
    far = (start + timedelta(days=400)).date()
    rule = rule_build(frequency=Frequency.DAILY, first_start=start, until=far)
    with pytest.raises(BookingError, match="at most 100"):
        occurrences(rule=rule, first_start=start, duration=timedelta(hours=1))


@pytest.mark.parametrize(
    "rule",
    [
        "FREQ=SECONDLY;COUNT=3",
        "FREQ=WEEKLY",  # never ends
        "FREQ=WEEKLY;COUNT=3;BYHOUR=1",
        "FREQ=WEEKLY;COUNT=3\nRRULE:FREQ=DAILY;COUNT=99",
        "",
    ],
)
def test_a_rule_the_screens_do_not_offer_is_refused(rule):
    start, _ = slot(days=1)
    with pytest.raises(BookingError) as info:
        occurrences(rule=rule, first_start=start, duration=timedelta(hours=1))
    assert info.value.code == "series_bad_rule"


def test_a_start_off_the_rule_is_refused():
    start = datetime(2031, 3, 12, 10, 0, tzinfo=SHANGHAI)  # a Wednesday
    with pytest.raises(BookingError) as info:
        occurrences(
            rule="FREQ=MONTHLY;BYDAY=2TU;COUNT=3", first_start=start, duration=timedelta(hours=1)
        )
    assert info.value.code == "series_start_not_in_rule"


# --- preview and reserve -----------------------------------------------------------------------


def test_preview_marks_the_taken_occurrence_and_writes_nothing(e17, e23):
    start, end = slot(days=1)
    booking_create(
        requester=e23, room="R7", start_at=start + timedelta(7), end_at=end + timedelta(7)
    )
    before = _state()
    preview = series_preview(
        user=e17, room_code="R7", start_at=start, end_at=end, rule=weekly(3), attendees=3
    )
    assert [r.free for r in preview.rows] == [True, False, True]
    assert preview.taken == 1
    assert not preview.needs_approval
    assert _state() == before


def test_preview_of_another_departments_room_says_it_needs_approval(e17):
    start, end = slot(days=1)
    preview = series_preview(
        user=e17, room_code="R12", start_at=start, end_at=end, rule=weekly(2), attendees=3
    )
    assert preview.needs_approval
    assert "another department" in preview.approval_reasons[0]


def test_reserve_all_books_every_occurrence_and_bumps_the_version_once(e17):
    version = Room.objects.get(code="R7").schedule_version
    result = reserve(e17, rule=weekly(4))
    assert len(result.booked) == 4
    assert Room.objects.get(code="R7").schedule_version == version + 1
    series = BookingSeries.objects.get()
    assert series.rule == "FREQ=WEEKLY;COUNT=4"
    rows = list(Booking.objects.filter(series=series).order_by("during"))
    assert [b.code for b in rows] == [b.code for b in result.booked]
    assert all(b.status == BookingStatus.CONFIRMED and b.requester == e17 for b in rows)
    assert all(b.created_version == version + 1 for b in rows)
    assert len({b.code for b in rows}) == 4


def test_reserve_all_with_one_taken_books_nothing(e17, e23):
    start, end = slot(days=1)
    booking_create(
        requester=e23, room="R7", start_at=start + timedelta(7), end_at=end + timedelta(7)
    )
    error = refused(
        "conflict",
        "series_taken",
        series_reserve,
        user=e17,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule=weekly(3),
        attendees=3,
        mode=SeriesMode.ALL,
        idempotency_key="k-all",
    )
    assert "1 of these times" in error.message


def test_reserve_free_only_skips_the_taken_one(e17, e23):
    start, end = slot(days=1)
    taken = booking_create(
        requester=e23, room="R7", start_at=start + timedelta(7), end_at=end + timedelta(7)
    )
    result = reserve(e17, rule=weekly(3), mode=SeriesMode.FREE_ONLY)
    assert [b.start_at for b in result.booked] == [start, start + timedelta(14)]
    assert [o.start_at for o in result.skipped] == [start + timedelta(7)]
    assert Booking.objects.get(pk=taken.pk).requester == e23


def test_reserve_free_only_with_nothing_free_is_a_conflict(e17, e23):
    start, end = slot(days=1)
    booking_create(requester=e23, room="R7", start_at=start, end_at=end)
    refused(
        "conflict",
        "series_taken",
        series_reserve,
        user=e17,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule=weekly(1),
        attendees=3,
        mode=SeriesMode.FREE_ONLY,
        idempotency_key="k-none",
    )


@pytest.mark.parametrize(
    ("room", "attendees", "code"),
    [("R99", 3, "room_not_found"), ("R11", 3, "room_not_bookable"), ("R7", 9, "over_capacity")],
)
def test_bad_rooms_and_sizes_are_refused(e17, room, attendees, code):
    start, end = slot(days=1)
    refused(
        "not_found" if code == "room_not_found" else "invalid_input",
        code,
        series_reserve,
        user=e17,
        room_code=room,
        start_at=start,
        end_at=end,
        rule=weekly(2),
        attendees=attendees,
        mode=SeriesMode.ALL,
        idempotency_key="k-bad",
    )


def test_an_occurrence_beyond_the_horizon_is_refused(e17):
    start, end = slot(days=1)
    refused(
        "invalid_input",
        "beyond_horizon",
        series_reserve,
        user=e17,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule="FREQ=WEEKLY;COUNT=20",
        attendees=3,
        mode=SeriesMode.ALL,
        idempotency_key="k-far",
    )


def test_the_same_key_replays_and_another_request_under_it_is_refused(e17):
    first = reserve(e17, rule=weekly(2), key="k-same")
    again = reserve(e17, rule=weekly(2), key="k-same")
    assert again.replayed
    assert again.series.pk == first.series.pk
    assert Booking.objects.count() == 2
    refused(
        "idempotency_key_reuse",
        "idempotency_key_reuse",
        series_reserve,
        user=e17,
        room_code="R9",
        start_at=slot(days=1)[0],
        end_at=slot(days=1)[1],
        rule=weekly(2),
        attendees=3,
        mode=SeriesMode.ALL,
        idempotency_key="k-same",
    )


# --- cancel ------------------------------------------------------------------------------------


def test_cancel_this_and_following_leaves_the_earlier_ones(e17):
    result = reserve(e17, rule=weekly(4))
    codes = [b.code for b in result.booked]
    version = Room.objects.get(code="R7").schedule_version
    done = series_cancel(
        user=e17, series_id=result.series.pk, from_booking=codes[2], idempotency_key="c1"
    )
    assert done.cancelled == codes[2:]
    statuses = dict(Booking.objects.values_list("code", "status"))
    assert [statuses[c] for c in codes] == ["confirmed", "confirmed", "cancelled", "cancelled"]
    assert Room.objects.get(code="R7").schedule_version == version + 1
    assert set(Booking.objects.filter(code__in=codes[2:]).values_list("sequence", flat=True)) == {1}
    assert set(Booking.objects.filter(code__in=codes[:2]).values_list("sequence", flat=True)) == {0}
    again = series_cancel(user=e17, series_id=result.series.pk, idempotency_key="c1")
    assert again.replayed
    assert again.cancelled == codes[2:]


def test_cancel_all_cancels_every_upcoming_occurrence(e17):
    result = reserve(e17, rule=weekly(3))
    done = series_cancel(user=e17, series_id=result.series.pk, idempotency_key="c-all")
    assert len(done.cancelled) == 3
    assert not Booking.objects.filter(status=BookingStatus.CONFIRMED).exists()
    assert SeriesCancellation.objects.get().cancelled == done.cancelled


def test_someone_elses_series_does_not_exist_for_them(e17, e23):
    result = reserve(e17, rule=weekly(2))
    with pytest.raises(BookingError) as info:
        series_cancel(user=e23, series_id=result.series.pk, idempotency_key="c-x")
    assert info.value.code == "series_not_found"
    assert not Booking.objects.filter(status=BookingStatus.CANCELLED).exists()
    assert not SeriesCancellation.objects.exists()


# --- through the runtime -------------------------------------------------------------------------
# The runtime runs the tool on its own thread and connection: these tests commit.


@pytest.mark.django_db(transaction=True)
def test_the_screen_books_a_series_through_the_runtime(e17):
    start, end = slot(days=1)
    outcome = series_request(
        user=e17,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule=weekly(3),
        attendees=3,
        mode=SeriesMode.ALL,
        idempotency_key="screen-1",
    )
    assert outcome.kind == "booked"
    assert len(outcome.value["booked"]) == 3
    series = BookingSeries.objects.get()
    assert series.idempotency_key == f"web:{e17.pk}:screen-1"
    assert series.run_id  # recorded as a governed call
    again = series_request(
        user=e17,
        room_code="R7",
        start_at=start,
        end_at=end,
        rule=weekly(3),
        attendees=3,
        mode=SeriesMode.ALL,
        idempotency_key="screen-1",
    )
    assert again.value["series_id"] == series.pk
    assert Booking.objects.count() == 3
    cancelled = series_cancel_request(
        user=e17, series_id=series.pk, from_booking=None, idempotency_key="screen-2"
    )
    assert len(cancelled.value["cancelled"]) == 3
    assert not Booking.objects.filter(status=BookingStatus.CONFIRMED).exists()


@pytest.mark.django_db(transaction=True)
def test_a_series_in_a_premium_room_asks_one_approval_listing_the_occurrences(e17):
    start, end = slot(days=1)
    before = _state()
    outcome = series_request(
        user=e17,
        room_code="R16",
        start_at=start,
        end_at=end,
        rule=weekly(3),
        attendees=3,
        mode=SeriesMode.FREE_ONLY,
        idempotency_key="screen-r16",
    )
    assert outcome.kind == "pending"
    assert _state() == before
    request = ApprovalRequest.objects.get()
    reasons = request.intent["risk_reasons"]
    assert any("premium" in r for r in reasons)
    listed = next(r for r in reasons if r.startswith("3 occurrences"))
    for week in range(3):
        moment = timezone.localtime(start + timedelta(weeks=week))
        assert f"{moment:%Y-%m-%d %H:%M}" in listed
    assert request.intent["params"]["rrule"] == "FREQ=WEEKLY;COUNT=3"


@pytest.mark.django_db(transaction=True)
def test_the_runtime_refuses_a_bad_rule_and_writes_nothing(e17):
    start, end = slot(days=1)
    before = _state()
    with pytest.raises(BookingError) as info:
        series_request(
            user=e17,
            room_code="R7",
            start_at=start,
            end_at=end,
            rule="FREQ=WEEKLY;COUNT=500",
            attendees=3,
            mode=SeriesMode.ALL,
            idempotency_key="bad-rule",
        )
    assert info.value.code == "series_too_many"
    assert _state() == before
