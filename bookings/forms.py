"""Parsing of the employee screens' input. The booking rules live in bookings.rules and the
services; these forms only turn request data into typed arguments for them."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, gettext_noop

from accounts.models import Department
from accounts.typed import TypedField, TypedTextField
from bookings.errors import BookingError
from bookings.rules import EQUIPMENT_LABELS, KNOWN_EQUIPMENT, MAX_TITLE
from bookings.schedule import Filters

# The forms' own field named ``date`` hides the class in their bodies: this names it there.
_Day = date

EQUIPMENT_CHOICES = [(name, EQUIPMENT_LABELS[name]) for name in KNOWN_EQUIPMENT]


def _tomorrow() -> date:
    return timezone.localdate() + timedelta(days=1)


_TIME = forms.TimeInput(attrs={"type": "time"}, format="%H:%M")


class SearchForm(forms.Form):
    # The browser's date and time pickers take ISO values and show them in its own locale.
    date = forms.DateField(
        label=gettext_lazy("Date"),
        initial=_tomorrow,
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
    )
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

    def parse(self) -> dict[str, Any]:
        """Keyword arguments for selectors.room_search; invalid input raises BookingError."""
        if not self.is_valid():
            raise form_error(self, gettext_noop("Correct the search and try again."))
        tz = ZoneInfo(settings.TIME_ZONE)
        day = self.cleaned_data["date"]
        return {
            "start_at": datetime.combine(day, self.cleaned_data["start"], tzinfo=tz),
            "end_at": datetime.combine(day, self.cleaned_data["end"], tzinfo=tz),
            "attendees": self.cleaned_data["attendees"],
            "equipment": self.cleaned_data["equipment"],
        }


class BookForm(forms.Form):
    """The hidden fields of one search result row. Their labels name them in error messages."""

    room = forms.CharField(label=gettext_lazy("Room"), max_length=16)
    start_at = forms.DateTimeField(label=gettext_lazy("Start at"))
    end_at = forms.DateTimeField(label=gettext_lazy("End at"))
    attendees = forms.IntegerField(label=gettext_lazy("Attendees"))
    equipment = forms.MultipleChoiceField(
        label=gettext_lazy("Equipment"), choices=EQUIPMENT_CHOICES, required=False
    )
    idempotency_key = forms.UUIDField(label=gettext_lazy("Idempotency key"))
    # The schedule version the search showed: the booking is of what the person saw.
    version = forms.IntegerField(label=gettext_lazy("Version"), min_value=0, required=False)
    title = TypedTextField(
        typed=TypedField.TITLE,
        label=gettext_lazy("Meeting title"),
        max_length=MAX_TITLE,
        required=False,
    )
    another_room = forms.BooleanField(
        label=gettext_lazy("Yes, I need another room too"), required=False
    )

    def parse(self) -> dict[str, Any]:
        """Keyword arguments for services.booking_reserve (without the user); invalid input
        raises BookingError."""
        if not self.is_valid():
            raise form_error(
                self, gettext_noop("Search again and use the Book button of a result.")
            )
        data = self.cleaned_data
        return {
            "room_code": data["room"],
            "start_at": data["start_at"],
            "end_at": data["end_at"],
            "attendees": data["attendees"],
            "equipment": data["equipment"],
            # The runtime namespaces it ("web:<user>:<key>"): it never meets an agent run's key.
            "idempotency_key": str(data["idempotency_key"]),
            "observed_version": data["version"],
            "title": data["title"],
            "another_room": data["another_room"],
        }


def form_error(form: forms.Form, hint: str) -> BookingError:
    """The form's errors in the shape the screens show for every refusal. Django's own error
    texts are already in the active language; ``hint`` is a msgid."""
    problems = " ".join(
        gettext("%(field)s: %(errors)s")
        # An ErrorList yields its messages as text; the stubs type its items as stored.
        % {"field": _label(form, name), "errors": " ".join(errors)}  # type: ignore[arg-type]
        for name, errors in form.errors.items()
    )
    return BookingError(
        "invalid_input",
        "bad_form",
        gettext_noop("Please check the input. %(problems)s"),
        hint,
        params={"problems": problems},
    )


def _label(form: forms.Form, name: str) -> str:
    field = form.fields.get(name)
    if field is None:
        return gettext("Form")
    return str(field.label or name.replace("_", " ").capitalize())


class DayForm(forms.Form):
    """The day view's filters; every field may be left out."""

    date = forms.DateField(
        label=gettext_lazy("Day"),
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
    )
    attendees = forms.IntegerField(
        label=gettext_lazy("People"), min_value=1, max_value=999, required=False
    )
    equipment = forms.MultipleChoiceField(
        label=gettext_lazy("Equipment"),
        choices=EQUIPMENT_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    floor = forms.TypedChoiceField(
        label=gettext_lazy("Floor"), coerce=int, empty_value=None, required=False, choices=()
    )
    department = forms.ChoiceField(
        label=gettext_lazy("Department"),
        required=False,
        choices=[("", gettext_lazy("Any department")), *Department.choices],
    )

    def __init__(self, *args: Any, floors: list[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # cast: "floor" is the TypedChoiceField declared above (fields are deep copies of them).
        floor = cast(forms.TypedChoiceField, self.fields["floor"])
        floor.choices = [("", gettext_lazy("Any floor"))] + [(f, str(f)) for f in floors]

    def parse(self) -> tuple[_Day, Filters]:
        """The day and the filters; invalid input raises BookingError."""
        if not self.is_valid():
            raise form_error(self, gettext_noop("Correct the filters and try again."))
        data = self.cleaned_data
        filters = Filters(
            attendees=data["attendees"] or 1,
            equipment=tuple(data["equipment"]),
            floor=data["floor"],
            department=data["department"],
        )
        return data["date"] or timezone.localdate(), filters


class ChangeForm(forms.Form):
    """A booking's new room, day, times, people and title."""

    room = forms.CharField(label=gettext_lazy("Room"), max_length=16)
    date = forms.DateField(
        label=gettext_lazy("Date"),
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
    )
    start = forms.TimeField(label=gettext_lazy("From"), widget=_TIME)
    end = forms.TimeField(label=gettext_lazy("To"), widget=_TIME)
    attendees = forms.IntegerField(label=gettext_lazy("People"), min_value=1, max_value=999)
    title = TypedTextField(
        typed=TypedField.TITLE,
        label=gettext_lazy("Meeting title"),
        max_length=MAX_TITLE,
        required=False,
    )
    idempotency_key = forms.UUIDField(widget=forms.HiddenInput)

    def parse(self) -> dict[str, Any]:
        """Keyword arguments for services.booking_change_request (without the user and code)."""
        if not self.is_valid():
            raise form_error(self, gettext_noop("Correct the change and try again."))
        data = self.cleaned_data
        tz = ZoneInfo(settings.TIME_ZONE)
        return {
            "room_code": data["room"],
            "start_at": datetime.combine(data["date"], data["start"], tzinfo=tz),
            "end_at": datetime.combine(data["date"], data["end"], tzinfo=tz),
            "attendees": data["attendees"],
            "title": data["title"],
            "idempotency_key": str(data["idempotency_key"]),
        }


class ChangePick(ChangeForm):
    """A free time picked under "Free instead" on the change page: it fills that page's form
    again (a link's query), so saving it moves the booking. Nothing here writes."""

    idempotency_key = None  # type: ignore[assignment]  # the page makes its own
