from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookings.assistant.parsing import (
    END_BEFORE_START,
    NO_END,
    BookingRequest,
    Clarification,
    parse_booking_request,
)
from bookings.assistant.replies import clarifying_question

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 26, 13, 0, tzinfo=SHANGHAI)  # a Saturday


def parse(text: str) -> BookingRequest | Clarification:
    return parse_booking_request(text, now=NOW, tz=SHANGHAI)


def at(day: str, hhmm: str) -> datetime:
    return datetime.fromisoformat(f"{day}T{hhmm}").replace(tzinfo=SHANGHAI)


# text, "day start-end", attendees[, "equipment ...", room code]
EN_REQUESTS = [
    (
        "book a room on 2026-09-28 14:00-15:00 for 3 people with a projector",
        "2026-09-28 14:00-15:00",
        3,
        "projector",
    ),
    ("2026/9/28 14:00 to 15:00, 3 persons", "2026-09-28 14:00-15:00", 3),
    ("book 28 Sep 2026 from 2pm to 3pm for 3", "2026-09-28 14:00-15:00", 3),
    (
        "Reserve September 28, 2026, 2-3pm, 4 attendees, whiteboard please",
        "2026-09-28 14:00-15:00",
        4,
        "whiteboard",
    ),
    ("Sep 28 2:30pm-4pm team of 5", "2026-09-28 14:30-16:00", 5),
    ("meeting 9/28 14:00~15:00 for 6", "2026-09-28 14:00-15:00", 6),
    ("book 28th of September 10am-11:30am for 2 people", "2026-09-28 10:00-11:30", 2),
    ("book 9/28/2026 at 2 for 2 hours, 3 people", "2026-09-28 14:00-16:00", 3),
    ("book 28/9 10:00-11:00 for 3 people", "2026-09-28 10:00-11:00", 3),
    ("book a room on the 30th 2pm for an hour for 3", "2026-09-30 14:00-15:00", 3),
    ("Sep 20 9-10am for 3 people", "2027-09-20 09:00-10:00", 3),
    ("book a room today 4pm-5pm for two", "2026-09-26 16:00-17:00", 2),
    (
        "tomorrow at 14:00 for 90 minutes, 3 people, video conference",
        "2026-09-27 14:00-15:30",
        3,
        "video",
    ),
    ("day after tomorrow at 2pm for 1 hour for 3", "2026-09-28 14:00-15:00", 3),
    ("next Monday 10am-11am 6 people in R7", "2026-09-28 10:00-11:00", 6, "", "R7"),
    ("on Friday 9-10am for 2", "2026-10-02 09:00-10:00", 2),
    ("on Saturday 9-10am for 2", "2026-10-03 09:00-10:00", 2),
    ("this saturday 10-11am, 3 people", "2026-09-26 10:00-11:00", 3),
    ("today 11-1pm 3 people", "2026-09-26 11:00-13:00", 3),
    ("book tomorrow between 2 and 3pm for three people", "2026-09-27 14:00-15:00", 3),
    ("book tomorrow from 2 to 3 for 3", "2026-09-27 14:00-15:00", 3),
    ("this afternoon 2-3 for 3 people", "2026-09-26 14:00-15:00", 3),
    ("good morning! tomorrow from 2 to 3 for 3 people", "2026-09-27 14:00-15:00", 3),
    ("tonight 7-8 for 3", "2026-09-26 19:00-20:00", 3),
    ("book tomorrow noon to 1pm for 3 people", "2026-09-27 12:00-13:00", 3),
    ("tomorrow at 3pm for an hour and a half, 2 people", "2026-09-27 15:00-16:30", 2),
    ("tomorrow 3pm for half an hour, 2 people", "2026-09-27 15:00-15:30", 2),
    ("book tomorrow 2-3pm for 3-4 people", "2026-09-27 14:00-15:00", 4),
    ("book a room tomorrow 10-11 for 3", "2026-09-27 10:00-11:00", 3),
    ("book a room for 3-4 tomorrow 10-11", "2026-09-27 10:00-11:00", 4),
    (
        "Book a room for 4 people next Wednesday from 3:30 PM to 5 PM with video conferencing",
        "2026-09-30 15:30-17:00",
        4,
        "video",
    ),
    (
        "book r12 on 2026-10-05 from 9:30 to 11 for a group of 8, need a phone and a screen",
        "2026-10-05 09:30-11:00",
        8,
        "display phone",
        "R12",
    ),
    (
        "book a room for 3 tomorrow 2pm-3pm without a whiteboard but with a projector",
        "2026-09-27 14:00-15:00",
        3,
        "projector",
    ),
]
ZH_REQUESTS = [
    (
        "帮我订 2026 年 9 月 28 日 14:00–15:00 的会议室，3 个人，要有投影",
        "2026-09-28 14:00-15:00",
        3,
        "projector",
    ),
    ("2026年9月28日14点到15点3人", "2026-09-28 14:00-15:00", 3),
    ("9月28日下午两点到三点，三个人，要白板", "2026-09-28 14:00-15:00", 3, "whiteboard"),
    ("9 月 28 号 上午十点到十一点半 五位 视频会议", "2026-09-28 10:00-11:30", 5, "video"),
    ("九月二十八日下午2点到3点，二十人", "2026-09-28 14:00-15:00", 20),
    ("二〇二六年九月二十八日 14:00~15:00 两个人", "2026-09-28 14:00-15:00", 2),
    ("30号下午3点到4点 3人", "2026-09-30 15:00-16:00", 3),
    ("明天晚上7点到8点 3人", "2026-09-27 19:00-20:00", 3),
    ("后天中午12点到1点，4个人，要电话", "2026-09-28 12:00-13:00", 4, "phone"),
    ("今天两点半到三点半，2人，大屏", "2026-09-26 14:30-15:30", 2, "display"),
    ("下周一下午2点到3点 R7 会议室 3人", "2026-09-28 14:00-15:00", 3, "", "R7"),
    ("周五14点开始，1小时，3人", "2026-10-02 14:00-15:00", 3),
    ("星期五下午3点开始，两个小时，三个人", "2026-10-02 15:00-17:00", 3),
    ("周六上午九点到十点 3人", "2026-10-03 09:00-10:00", 3),
    ("周五十点到十一点 3人", "2026-10-02 10:00-11:00", 3),
    ("下下周二上午九点到十点 3人", "2026-10-06 09:00-10:00", 3),
    ("上午11点到1点 明天 3人", "2026-09-27 11:00-13:00", 3),
    ("明天2点到3点 3人", "2026-09-27 14:00-15:00", 3),
    ("明天十点一刻到十一点 3名同事", "2026-09-27 10:15-11:00", 3),
    ("明天下午2点开始，一个半小时，3人", "2026-09-27 14:00-15:30", 3),
    ("明天下午两点开始开半小时会，2人", "2026-09-27 14:00-14:30", 2),
    ("我们五个人明天下午开会，三点到四点", "2026-09-27 15:00-16:00", 5),
    (
        "帮我预约后天上午9:00-10:30的会议室，6位同事，需要白板和投影仪",
        "2026-09-28 09:00-10:30",
        6,
        "projector whiteboard",
    ),
    (
        "订R7会议室，明天两点到三点，3个人，不要白板，要显示屏和视频",
        "2026-09-27 14:00-15:00",
        3,
        "display video",
        "R7",
    ),
    ("快一点帮我订明天下午2点到3点的会议室 3人", "2026-09-27 14:00-15:00", 3),
    ("早上好，明天2点到3点订个会议室，3人", "2026-09-27 14:00-15:00", 3),
    ("明晚7点到8点 3人", "2026-09-27 19:00-20:00", 3),
    ("R7 明天 １４：００－１５：００ ３人", "2026-09-27 14:00-15:00", 3, "", "R7"),
]


def expected(
    when: str, attendees: int, equipment: str = "", room: str | None = None, *, language: str
) -> BookingRequest:
    day, span = when.split()
    start, end = span.split("-")
    return BookingRequest(
        start_at=at(day, start),
        end_at=at(day, end),
        attendees=attendees,
        equipment=tuple(equipment.split()),
        room_code=room,
        language=language,
    )


@pytest.mark.parametrize("row", EN_REQUESTS, ids=[row[0] for row in EN_REQUESTS])
def test_english_request_is_parsed_into_constraints(row: tuple) -> None:
    text, *spec = row
    assert parse(text) == expected(*spec, language="en")


@pytest.mark.parametrize("row", ZH_REQUESTS, ids=[row[0] for row in ZH_REQUESTS])
def test_chinese_request_is_parsed_into_constraints(row: tuple) -> None:
    text, *spec = row
    assert parse(text) == expected(*spec, language="zh")


def test_seed_sentence_yields_aware_datetimes_in_tz_without_seconds() -> None:
    result = parse("帮我订 2026 年 9 月 28 日 14:00–15:00 的会议室，3 个人，要有投影")

    assert isinstance(result, BookingRequest)
    assert result.start_at.isoformat() == "2026-09-28T14:00:00+08:00"
    assert result.end_at.isoformat() == "2026-09-28T15:00:00+08:00"
    assert result.start_at.tzinfo is SHANGHAI
    assert result.start_at.second == result.start_at.microsecond == 0


def test_times_are_wall_clock_in_the_given_tz() -> None:
    new_york = ZoneInfo("America/New_York")
    now = datetime(2026, 9, 26, 5, 0, tzinfo=SHANGHAI)  # still Sep 25 in New York

    result = parse_booking_request("tomorrow 9-10am for 3 people", now=now, tz=new_york)

    assert isinstance(result, BookingRequest)
    assert result.start_at == datetime(2026, 9, 26, 9, 0, tzinfo=new_york)
    assert result.start_at.utcoffset() == timedelta(hours=-4)


def test_a_turn_read_again_on_another_day_answers_for_that_day() -> None:
    """A request's turn is read once per day and reused (reading._read_turn_once): the same
    words read again on the same day give the same reading, and on the next day answer for
    that day, never the first one's."""
    text = "tomorrow 2-3pm for 3 people"
    first = parse_booking_request(text, now=NOW, tz=SHANGHAI)
    again = parse_booking_request(text, now=NOW + timedelta(minutes=5), tz=SHANGHAI)
    next_day = parse_booking_request(text, now=NOW + timedelta(days=1), tz=SHANGHAI)

    assert isinstance(first, BookingRequest) and isinstance(next_day, BookingRequest)
    assert again == first and first.start_at == at("2026-09-27", "14:00")
    assert next_day.start_at == at("2026-09-28", "14:00")


def test_naive_now_is_read_in_tz() -> None:
    now = datetime(2026, 9, 26, 13, 0)

    result = parse_booking_request("明天下午2点到3点 3人", now=now, tz=SHANGHAI)

    assert isinstance(result, BookingRequest)
    assert result.start_at == at("2026-09-27", "14:00")


def test_duration_running_past_midnight_ends_next_day() -> None:
    result = parse("book tomorrow 23:00 for 2 hours for 2")

    assert isinstance(result, BookingRequest)
    assert result.end_at == at("2026-09-28", "01:00")


@pytest.mark.parametrize(
    ("text", "missing", "language", "question"),
    [
        ("book a room 14:00-15:00 for 3 people", ("date",), "en", "Could you tell me which day?"),
        (
            "book a room tomorrow for 3",
            ("time",),
            "en",
            "Could you tell me what time (start and end)?",
        ),
        (
            "book a room tomorrow 2-3pm",
            ("attendees",),
            "en",
            "Could you tell me for how many people?",
        ),
        (
            "book a room please",
            ("date", "time", "attendees"),
            "en",
            "Could you tell me which day, what time (start and end) and for how many people?",
        ),
        (
            "book a room for 3",
            ("date", "time"),
            "en",
            "Could you tell me which day and what time (start and end)?",
        ),
        ("下午3点到4点 3人", ("date",), "zh", "能告诉我日期吗？"),
        ("帮我订明天的会议室", ("time", "attendees"), "zh", "能告诉我时间（开始和结束）和人数吗？"),
        ("明天下午两点到三点", ("attendees",), "zh", "能告诉我人数吗？"),
        (
            "订个会议室",
            ("date", "time", "attendees"),
            "zh",
            "能告诉我日期、时间（开始和结束）和人数吗？",
        ),
        ("明天 2点到3点 一两个人", ("attendees",), "zh", "能告诉我人数吗？"),
    ],
)
def test_incomplete_request_asks_for_exactly_what_is_missing(
    text: str, missing: tuple[str, ...], language: str, question: str
) -> None:
    result = parse(text)
    assert result == Clarification(missing=missing, language=language)
    assert clarifying_question(result) == question


@pytest.mark.parametrize(
    ("text", "language", "question"),
    [
        (
            "book a room at 3pm tomorrow for 3",
            "en",
            "Could you tell me until what time (or for how long)?",
        ),
        ("明天下午3点 3人", "zh", "能告诉我结束时间或时长吗？"),
    ],
)
def test_start_without_end_asks_for_end_or_duration(
    text: str, language: str, question: str
) -> None:
    result = parse(text)
    assert result == Clarification(missing=("time",), language=language, problem=NO_END)
    assert clarifying_question(result) == question


@pytest.mark.parametrize(
    ("text", "language", "phrase"),
    [
        ("book a room tomorrow 3pm-2pm for 3 people", "en", "end time must be after the start"),
        ("book 2026-09-28 15:00-14:00 for 3", "en", "end time must be after the start"),
        ("book tomorrow 9pm to 8pm for 3", "en", "end time must be after the start"),
        ("明天下午3点到2点 3人", "zh", "结束时间必须晚于开始时间"),
        ("2026年9月28日 14:00–14:00 3人", "zh", "结束时间必须晚于开始时间"),
    ],
)
def test_end_not_after_start_asks_for_time_again(text: str, language: str, phrase: str) -> None:
    result = parse(text)

    assert isinstance(result, Clarification)
    assert result.missing == ("time",)
    assert result.language == language
    assert result.problem == END_BEFORE_START
    assert phrase in clarifying_question(result)


def test_impossible_date_is_missing() -> None:
    result = parse("book 2026-02-30 10:00-11:00 for 3 people")

    assert isinstance(result, Clarification)
    assert result.missing == ("date",)


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("hello", "en"),
        ("what's the weather", "en"),
        ("what's the weather tomorrow at 3pm", "en"),
        ("asdf qwer 123", "en"),
        ("你好", "zh"),
        ("今天天气怎么样", "zh"),
    ],
)
def test_text_that_is_not_a_booking_request_misses_everything(text: str, language: str) -> None:
    result = parse(text)

    assert isinstance(result, Clarification)
    assert result.missing == ("date", "time", "attendees")
    assert result.language == language


# --- round trip: random valid requests rendered through a few templates ---------------------

EN_EQUIPMENT = {
    "display": "a screen",
    "phone": "a conference phone",
    "projector": "a projector",
    "video": "video conferencing",
    "whiteboard": "a whiteboard",
}
ZH_EQUIPMENT = {
    "display": "大屏",
    "phone": "电话",
    "projector": "投影仪",
    "video": "视频会议",
    "whiteboard": "白板",
}
CN_DIGITS = "零一二三四五六七八九"


def chinese_number(n: int, *, liang: bool = False) -> str:
    if n == 2 and liang:
        return "两"
    if n < 10:
        return CN_DIGITS[n]
    tens, units = divmod(n, 10)
    return ("" if tens == 1 else CN_DIGITS[tens]) + "十" + (CN_DIGITS[units] if units else "")


def en_clock(minutes: int) -> str:
    hour, minute = divmod(minutes, 60)
    suffix = "am" if hour < 12 else "pm"
    return f"{hour % 12 or 12}{f':{minute:02d}' if minute else ''}{suffix}"


def zh_clock(minutes: int) -> str:
    hour, minute = divmod(minutes, 60)
    period = "上午" if hour < 12 else "中午" if hour == 12 else "下午" if hour < 18 else "晚上"
    half = "半" if minute == 30 else ""
    return f"{period}{chinese_number(hour % 12 or 12, liang=True)}点{half}"


def render(template: int, day: date, start: int, end: int, people: int, kit: list[str]) -> str:
    hhmm = f"{start // 60:02d}:{start % 60:02d}", f"{end // 60:02d}:{end % 60:02d}"
    en_kit = f" with {' and '.join(EN_EQUIPMENT[k] for k in kit)}" if kit else ""
    zh_kit = f"，要有{'和'.join(ZH_EQUIPMENT[k] for k in kit)}" if kit else ""
    month = day.strftime("%B")
    templates = [
        f"book a room on {day:%Y-%m-%d} {hhmm[0]}-{hhmm[1]} for {people} people{en_kit}",
        f"Please reserve {month} {day.day}, {day.year} from {en_clock(start)} to "
        f"{en_clock(end)}, {people} attendees{en_kit}",
        f"{day.day} {month[:3]} {day.year} at {hhmm[0]} for {end - start} minutes, "
        f"team of {people}{en_kit}",
        f"帮我订 {day.year} 年 {day.month} 月 {day.day} 日 {hhmm[0]}–{hhmm[1]} 的会议室，"
        f"{people} 个人{zh_kit}",
        f"{day.year}年{day.month}月{day.day}日{zh_clock(start)}到{zh_clock(end)}，"
        f"{chinese_number(people)}位{zh_kit}",
        f"{day.year}/{day.month}/{day.day} {start // 60}点{start % 60}分开始，"
        f"{end - start}分钟，{people}人{zh_kit}",
    ]
    return templates[template]


@st.composite
def bookings(draw: st.DrawFn) -> tuple[int, date, int, int, int, list[str]]:
    template = draw(st.integers(0, 5))
    day = draw(st.dates(min_value=date(2026, 1, 1), max_value=date(2030, 12, 31)))
    step = 30 if template == 4 else 15  # 上午十点半 has no quarter hours
    start = draw(st.integers(7 * 60 // step, 20 * 60 // step)) * step
    end = draw(st.integers(start // step + 1, 23 * 60 // step)) * step
    people = draw(st.integers(1, 20))
    kit = draw(st.lists(st.sampled_from(sorted(EN_EQUIPMENT)), unique=True, max_size=3))
    return template, day, start, end, people, kit


@settings(max_examples=300, deadline=None)
@given(bookings())
def test_rendered_requests_round_trip(booking: tuple[int, date, int, int, int, list[str]]) -> None:
    template, day, start, end, people, kit = booking
    text = render(template, day, start, end, people, kit)
    midnight = datetime(day.year, day.month, day.day, tzinfo=SHANGHAI)

    assert parse(text) == BookingRequest(
        start_at=midnight + timedelta(minutes=start),
        end_at=midnight + timedelta(minutes=end),
        attendees=people,
        equipment=tuple(sorted(kit)),
        room_code=None,
        language="zh" if template >= 3 else "en",
    ), text
