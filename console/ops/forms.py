"""Parsing of the audit log's filters and export options into typed values."""

from __future__ import annotations

from django import forms
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy

from accounts.models import AuditAction
from agentops.contract import SideEffect
from agentops.selectors import ActionStatus, AuditFilters, ExportFormat, RowKind, tools_all

_DATE = forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")
_ANY: list[tuple[str, str | Promise]] = [("", gettext_lazy("Any"))]


def _tool_choices() -> list[tuple[str, str | Promise]]:
    return _ANY + [(spec.name, spec.name) for spec in tools_all()]


def _outcome_choices() -> list[tuple[str | Promise, object]]:
    calls = [(s.value, s.value) for s in ActionStatus]
    people = list(AuditAction.choices)
    return [
        *_ANY,
        (gettext_lazy("Tool calls"), calls),
        (gettext_lazy("Human decisions"), people),
    ]


class AuditFilterForm(forms.Form):
    user = forms.CharField(
        label=gettext_lazy("User"),
        required=False,
        max_length=150,
        help_text=gettext_lazy("Username or employee id"),
    )
    kind = forms.ChoiceField(
        label=gettext_lazy("Kind"),
        required=False,
        choices=[
            *_ANY,
            (RowKind.TOOL.value, gettext_lazy("Tool calls")),
            (RowKind.HUMAN.value, gettext_lazy("Human decisions")),
        ],
    )
    tool = forms.ChoiceField(label=gettext_lazy("Tool"), required=False, choices=_tool_choices)
    outcome = forms.ChoiceField(
        label=gettext_lazy("Outcome"), required=False, choices=_outcome_choices
    )
    risk = forms.ChoiceField(
        label=gettext_lazy("Risk"),
        required=False,
        choices=_ANY + [(level.value, level.value) for level in SideEffect],
    )
    date_from = forms.DateField(label=gettext_lazy("From"), required=False, widget=_DATE)
    date_to = forms.DateField(label=gettext_lazy("To"), required=False, widget=_DATE)
    drills = forms.BooleanField(
        label=gettext_lazy("Show drill and sandbox rows"),
        required=False,
        help_text=gettext_lazy("Rehearsals by the drill identities; hidden unless asked for."),
    )

    def filters(self) -> AuditFilters:
        """The filters; an invalid field is ignored (the form shows why)."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return AuditFilters(
            user=(data.get("user") or "").strip(),
            kind=data.get("kind") or "",
            tool=data.get("tool") or "",
            outcome=data.get("outcome") or "",
            risk=data.get("risk") or "",
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
            drills=bool(data.get("drills")),
        )


class ExportForm(AuditFilterForm):
    export_format = forms.ChoiceField(
        choices=[(f.value, f.value) for f in ExportFormat], initial=ExportFormat.CSV.value
    )
    personal_data = forms.BooleanField(
        label=gettext_lazy("Include request text and notes (personal data)"), required=False
    )

    def options(self) -> tuple[ExportFormat, bool]:
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        fmt = data.get("export_format") or ExportFormat.CSV.value
        return ExportFormat(fmt), bool(data.get("personal_data"))
