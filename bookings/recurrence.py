"""Recurring meetings as RFC 5545 rules (python-dateutil's rrule): building a rule from what a
person chose, reading one back, and listing its occurrences.

Only the rules the screens offer are accepted (daily, weekly, every N weeks, monthly by
weekday; until a date or a count), whatever the channel: a rule from a model or an API client
is parsed by the same function and refused in the same words."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum

from dateutil import rrule
from django.utils import timezone
from django.utils.translation import gettext_noop

from bookings.errors import BookingError

MAX_OCCURRENCES = 100
MAX_INTERVAL = 12


class Frequency(StrEnum):
    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY_WEEKDAY = "monthly_weekday"


# What a rule may say: FREQ, INTERVAL, COUNT or UNTIL, and for monthly rules one BYDAY with
# its ordinal (2TU: the second Tuesday, -1FR: the last Friday).
_RULE = re.compile(
    r"^FREQ=(DAILY|WEEKLY|MONTHLY)"
    r"(;INTERVAL=\d{1,2})?"
    r"(;BYDAY=(-1|[1-4])(MO|TU|WE|TH|FR|SA|SU))?"
    r"(;(COUNT=\d{1,3}|UNTIL=\d{8}T\d{6}Z))$"
)
_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


def _refuse(code: str, message: str, hint: str = "", **params: object) -> BookingError:
    return BookingError("invalid_input", code, message, hint, params=params)


def rule_build(
    *,
    frequency: Frequency,
    first_start: datetime,
    interval: int = 1,
    count: int | None = None,
    until: date | None = None,
) -> str:
    """The RRULE value for what a person chose. ``until`` is a local date: the series may have
    an occurrence on that day. Exactly one of ``count`` and ``until``."""
    if (count is None) == (until is None):
        raise _refuse(
            "series_end_missing",
            gettext_noop("Say when the series ends: after a number of times or on a date."),
        )
    if not 1 <= interval <= MAX_INTERVAL:
        raise _refuse(
            "series_bad_interval",
            gettext_noop("Repeat every 1 to %(max)d periods."),
            max=MAX_INTERVAL,
        )
    parts = {
        Frequency.DAILY: ["FREQ=DAILY"],
        Frequency.WEEKLY: ["FREQ=WEEKLY"],
        Frequency.MONTHLY_WEEKDAY: ["FREQ=MONTHLY"],
    }[frequency]
    if interval != 1:
        parts.append(f"INTERVAL={interval}")
    if frequency == Frequency.MONTHLY_WEEKDAY:
        local = timezone.localtime(first_start)
        nth = (local.day - 1) // 7 + 1
        parts.append(f"BYDAY={-1 if nth == 5 else nth}{_DAYS[local.weekday()]}")
    if count is not None:
        if not 1 <= count <= MAX_OCCURRENCES:
            raise _refuse(
                "series_too_many",
                gettext_noop("A series has at most %(max)d occurrences."),
                gettext_noop("End it sooner."),
                max=MAX_OCCURRENCES,
            )
        parts.append(f"COUNT={count}")
    else:
        if until is None:  # the form requires one of count and until
            raise ValueError("a rule needs a count or an end date")
        end_of_day = timezone.make_aware(datetime.combine(until, time(23, 59, 59)))
        parts.append(f"UNTIL={end_of_day.astimezone(UTC):%Y%m%dT%H%M%SZ}")
    return ";".join(parts)


@dataclass(frozen=True)
class Occurrence:
    index: int  # 0-based, in the rule's order
    start_at: datetime
    end_at: datetime


def occurrences(*, rule: str, first_start: datetime, duration: timedelta) -> list[Occurrence]:
    """Every occurrence of ``rule`` from ``first_start`` (aware), in the first start's time
    zone (wall-clock times kept across offset changes). Refuses a rule this product does not
    offer, one whose first occurrence is not ``first_start``, and more than MAX_OCCURRENCES."""
    if not isinstance(rule, str) or not _RULE.match(rule):
        raise _refuse(
            "series_bad_rule",
            gettext_noop("This repeat rule is not one that rooms can be booked with."),
            gettext_noop(
                "Use daily, weekly or monthly by weekday, ending after a count or on a date."
            ),
        )
    interval = re.search(r";INTERVAL=(\d+)", rule)
    if interval is not None and not 1 <= int(interval.group(1)) <= MAX_INTERVAL:
        # What rule_build refuses from the screens, refused from every channel.
        raise _refuse(
            "series_bad_interval",
            gettext_noop("Repeat every 1 to %(max)d periods."),
            max=MAX_INTERVAL,
        )
    if first_start.tzinfo is None:
        raise _refuse("naive_datetime", gettext_noop("The start time has no UTC offset."))
    local_start = timezone.localtime(first_start)
    try:
        parsed = rrule.rrulestr(rule, dtstart=local_start)
        starts = list(itertools.islice(parsed, MAX_OCCURRENCES + 1))
    except (ValueError, OverflowError) as exc:
        raise _refuse(
            "series_bad_rule",
            gettext_noop("This repeat rule is not one that rooms can be booked with."),
        ) from exc
    if len(starts) > MAX_OCCURRENCES:
        raise _refuse(
            "series_too_many",
            gettext_noop("A series has at most %(max)d occurrences."),
            gettext_noop("End it sooner."),
            max=MAX_OCCURRENCES,
        )
    if not starts or starts[0] != local_start:
        raise _refuse(
            "series_start_not_in_rule",
            gettext_noop("The first meeting's date does not follow the repeat rule."),
            gettext_noop("Pick a start on a day the rule repeats on."),
        )
    return [Occurrence(i, s, s + duration) for i, s in enumerate(starts)]


def rule_describe_frequency(rule: str) -> Frequency:
    """Which of the offered kinds a rule is (for the screens)."""
    if rule.startswith("FREQ=DAILY"):
        return Frequency.DAILY
    if rule.startswith("FREQ=WEEKLY"):
        return Frequency.WEEKLY
    return Frequency.MONTHLY_WEEKDAY
