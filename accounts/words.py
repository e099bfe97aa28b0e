"""What the system says to a person, rendered in the reader's language at display time.

A message is stored as ``{"msgid": <English msgid>, "params": {...}}`` (the contract's
``Message``): the msgid goes through gettext, its tagged parameters are formatted for the reader
(``{"span": [start, end]}`` as weekday, date and time range, ``{"at": iso}``,
``{"department": code}``, a nested message). A plain string (a row recorded before messages
were stored as ids) is shown through gettext too, so a known English sentence still translates.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import formats, timezone
from django.utils.translation import gettext

from accounts.models import Department


def say(value: Any) -> str:
    """``value`` (a stored message, a list of them, or a string) in the active language."""
    if value is None or value == "":
        return ""
    if isinstance(value, list | tuple):
        return gettext("; ").join(say(v) for v in value)
    if hasattr(value, "as_json"):
        value = value.as_json()
    if isinstance(value, dict) and "msgid" in value:
        params = {k: _param(v) for k, v in (value.get("params") or {}).items()}
        text = gettext(str(value["msgid"])) if value["msgid"] else ""
        try:
            return text % params if params else text
        except (KeyError, TypeError, ValueError):
            return text
    return gettext(str(value))


def _moment(text: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return timezone.localtime(moment) if moment.tzinfo is not None else moment


def when(start: Any, end: Any) -> str:
    """A time range as people read it: ``Mon 28 Sep 2026, 10:00-11:00`` (with an en dash)."""
    lo, hi = _moment(start), _moment(end)
    if lo is None or hi is None:
        return f"{start}–{end}"
    day = formats.date_format(lo, "DATE_FORMAT")
    if lo.date() == hi.date():
        return gettext("%(day)s, %(start)s–%(end)s") % {
            "day": day,
            "start": formats.time_format(lo, "TIME_FORMAT"),
            "end": formats.time_format(hi, "TIME_FORMAT"),
        }
    return (
        f"{day} {formats.time_format(lo, 'TIME_FORMAT')} – "
        + formats.date_format(hi, "DATE_FORMAT")
        + f" {formats.time_format(hi, 'TIME_FORMAT')}"
    )


def _param(value: Any) -> Any:
    if isinstance(value, list):  # several messages, said one after the other
        return " ".join(say(v) for v in value)
    if not isinstance(value, dict):
        return value
    if "span" in value:
        start, end = [*list(value["span"]), "", ""][:2]
        return when(start, end)
    if "at" in value:
        moment = _moment(value["at"])
        if moment is None:
            return value["at"]
        day = formats.date_format(moment, "DATE_FORMAT")
        return f"{day} {formats.time_format(moment, 'TIME_FORMAT')}"
    if "department" in value:
        code = value["department"]
        return str(Department(code).label) if code in Department.values else code
    if "msgid" in value:
        return say(value)
    return value
