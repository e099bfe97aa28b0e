"""Parsing of the employee screens' input. The booking rules live in bookings.rules and the
services; these forms only turn request data into typed arguments for them."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.utils import timezone

from bookings.errors import BookingError
from bookings.rules import KNOWN_EQUIPMENT

EQUIPMENT_CHOICES = [(name, name) for name in KNOWN_EQUIPMENT]


def _tomorrow() -> date:
    return timezone.localdate() + timedelta(days=1)


_TIME = forms.TimeInput(attrs={"type": "time"}, format="%H:%M")


class SearchForm(forms.Form):
    date = forms.DateField(
        initial=_tomorrow, widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")
    )
    start = forms.TimeField(label="From", initial=time(10), widget=_TIME)
    end = forms.TimeField(label="To", initial=time(11), widget=_TIME)
    attendees = forms.IntegerField(label="People", initial=1, min_value=1, max_value=999)
    equipment = forms.MultipleChoiceField(
        choices=EQUIPMENT_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )

    def parse(self) -> dict[str, Any]:
        """Keyword arguments for selectors.room_search; invalid input raises BookingError."""
        if not self.is_valid():
            raise form_error(self, "Correct the search and try again.")
        tz = ZoneInfo(settings.TIME_ZONE)
        day = self.cleaned_data["date"]
        return {
            "start_at": datetime.combine(day, self.cleaned_data["start"], tzinfo=tz),
            "end_at": datetime.combine(day, self.cleaned_data["end"], tzinfo=tz),
            "attendees": self.cleaned_data["attendees"],
            "equipment": self.cleaned_data["equipment"],
        }


class BookForm(forms.Form):
    """The hidden fields of one search result row."""

    room = forms.CharField(max_length=16)
    start_at = forms.DateTimeField()
    end_at = forms.DateTimeField()
    attendees = forms.IntegerField()
    equipment = forms.MultipleChoiceField(choices=EQUIPMENT_CHOICES, required=False)
    idempotency_key = forms.UUIDField()

    def parse(self) -> dict[str, Any]:
        """Keyword arguments for services.booking_reserve (without the user); invalid input
        raises BookingError."""
        if not self.is_valid():
            raise form_error(self, "Search again and use the Book button of a result.")
        data = self.cleaned_data
        return {
            "room_code": data["room"],
            "start_at": data["start_at"],
            "end_at": data["end_at"],
            "attendees": data["attendees"],
            "equipment": data["equipment"],
            # Namespaced so a screen key can never collide with an agent run's key.
            "idempotency_key": f"web:{data['idempotency_key']}",
        }


def form_error(form: forms.Form, hint: str) -> BookingError:
    """The form's errors in the shape the screens show for every refusal."""
    problems = " ".join(
        f"{_label(form, name)}: {' '.join(errors)}" for name, errors in form.errors.items()
    )
    return BookingError("invalid_input", "bad_form", f"Please check the input. {problems}", hint)


def _label(form: forms.Form, name: str) -> str:
    field = form.fields.get(name)
    if field is None:
        return "Form"
    return str(field.label or name.replace("_", " ").capitalize())
