"""Parsing of the recurring-booking screen's input into typed arguments for bookings.series."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy, gettext_noop

from bookings.forms import EQUIPMENT_CHOICES, form_error
from bookings.recurrence import MAX_INTERVAL, MAX_OCCURRENCES, Frequency, rule_build
from bookings.series import SeriesMode

FREQUENCY_CHOICES = [
    (Frequency.DAILY.value, gettext_lazy("Every day")),
    (Frequency.WEEKLY.value, gettext_lazy("Every week on this weekday")),
    (
        Frequency.MONTHLY_WEEKDAY.value,
        gettext_lazy("Every month on this weekday (e.g. 2nd Tuesday)"),
    ),
]
ENDS_CHOICES = [
    ("count", gettext_lazy("After a number of meetings")),
    ("until", gettext_lazy("On a date")),
]
_TIME = forms.TimeInput(attrs={"type": "time"}, format="%H:%M")
_DATE = forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")


def _tomorrow() -> date:
    return timezone.localdate() + timedelta(days=1)


class SeriesForm(forms.Form):
    room = forms.ChoiceField(label=gettext_lazy("Room"))
    date = forms.DateField(label=gettext_lazy("First date"), initial=_tomorrow, widget=_DATE)
    start = forms.TimeField(label=gettext_lazy("From"), initial=time(10), widget=_TIME)
    end = forms.TimeField(label=gettext_lazy("To"), initial=time(11), widget=_TIME)
    attendees = forms.IntegerField(
        label=gettext_lazy("People"), initial=1, min_value=1, max_value=999
    )
    equipment = forms.MultipleChoiceField(
        label=gettext_lazy("Equipment"),
        choices=EQUIPMENT_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    frequency = forms.ChoiceField(
        label=gettext_lazy("Repeats"), choices=FREQUENCY_CHOICES, initial=Frequency.WEEKLY.value
    )
    interval = forms.IntegerField(
        label=gettext_lazy("Every how many (days, weeks or months)"),
        initial=1,
        min_value=1,
        max_value=MAX_INTERVAL,
    )
    ends = forms.ChoiceField(
        label=gettext_lazy("Ends"),
        choices=ENDS_CHOICES,
        initial="count",
        widget=forms.RadioSelect,
    )
    count = forms.IntegerField(
        label=gettext_lazy("Number of meetings"),
        initial=4,
        min_value=1,
        max_value=MAX_OCCURRENCES,
        required=False,
    )
    until = forms.DateField(label=gettext_lazy("Last date"), required=False, widget=_DATE)

    def __init__(self, *args: Any, rooms: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # cast: "room" is the ChoiceField declared above (fields are deep copies of them).
        cast(forms.ChoiceField, self.fields["room"]).choices = rooms

    def parse(self) -> dict[str, Any]:
        """Keyword arguments for bookings.series.series_preview (without the user)."""
        if not self.is_valid():
            raise form_error(self, gettext_noop("Correct the form and preview again."))
        data = self.cleaned_data
        tz = ZoneInfo(settings.TIME_ZONE)
        start_at = datetime.combine(data["date"], data["start"], tzinfo=tz)
        by_count = data["ends"] == "count"
        rule = rule_build(
            frequency=Frequency(data["frequency"]),
            first_start=start_at,
            interval=data["interval"],
            count=data["count"] if by_count else None,
            until=None if by_count else data["until"],
        )
        return {
            "room_code": data["room"],
            "start_at": start_at,
            "end_at": datetime.combine(data["date"], data["end"], tzinfo=tz),
            "rule": rule,
            "attendees": data["attendees"],
            "equipment": data["equipment"],
        }


class SeriesBookForm(forms.Form):
    """The hidden fields of a preview, the person's choice, and the one-time key."""

    room = forms.CharField(label=gettext_lazy("Room"), max_length=16)
    start_at = forms.DateTimeField(label=gettext_lazy("Start at"))
    end_at = forms.DateTimeField(label=gettext_lazy("End at"))
    rule = forms.CharField(label=gettext_lazy("Repeats"), max_length=120)
    attendees = forms.IntegerField(label=gettext_lazy("Attendees"), min_value=1)
    mode = forms.ChoiceField(
        label=gettext_lazy("Which meetings"),
        choices=[
            (SeriesMode.ALL.value, gettext_lazy("All of them")),
            (SeriesMode.FREE_ONLY.value, gettext_lazy("Only the free ones")),
        ],
    )
    idempotency_key = forms.UUIDField(label=gettext_lazy("Idempotency key"))

    def parse(self) -> dict[str, Any]:
        """Keyword arguments for bookings.series.series_request (without the user)."""
        if not self.is_valid():
            raise form_error(self, gettext_noop("Preview the series again and choose."))
        data = self.cleaned_data
        return {
            "room_code": data["room"],
            "start_at": data["start_at"],
            "end_at": data["end_at"],
            "rule": data["rule"],
            "attendees": data["attendees"],
            "mode": SeriesMode(data["mode"]),
            "idempotency_key": str(data["idempotency_key"]),
        }


class SeriesCancelForm(forms.Form):
    from_booking = forms.RegexField(
        label=gettext_lazy("From meeting"), regex=r"^B\d{1,9}$", required=False
    )
    idempotency_key = forms.UUIDField(label=gettext_lazy("Idempotency key"))

    def parse(self) -> dict[str, Any]:
        if not self.is_valid():
            raise form_error(self, gettext_noop("Open the series again and choose."))
        return {
            "from_booking": self.cleaned_data["from_booking"] or None,
            "idempotency_key": str(self.cleaned_data["idempotency_key"]),
        }
