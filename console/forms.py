"""The assistant's request box."""

from __future__ import annotations

import uuid

from django import forms
from django.utils.translation import gettext_lazy

from accounts.typed import TypedField, TypedTextField
from agentops.selectors import MAX_REQUEST_CHARS


class AssistantForm(forms.Form):
    request = TypedTextField(
        typed=TypedField.REQUEST,
        label=gettext_lazy("What do you need?"),
        max_length=MAX_REQUEST_CHARS,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    # A fresh key for every form shown: sending the same form twice starts one run.
    key = forms.UUIDField(widget=forms.HiddenInput, initial=uuid.uuid4)
    # The conversation this request continues (the run page's); empty: a new conversation.
    conversation = forms.UUIDField(widget=forms.HiddenInput, required=False)
