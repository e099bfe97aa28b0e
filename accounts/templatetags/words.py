"""``{{ value|say }}``: a stored message in the reader's language (see accounts.words)."""

from __future__ import annotations

from typing import Any

from django import template

from accounts import words

register = template.Library()


@register.filter
def say(value: Any) -> str:
    return words.say(value)


@register.simple_tag
def when(start: Any, end: Any) -> str:
    return words.when(start, end)
