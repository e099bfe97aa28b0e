"""Pages that fit their tool's size cap, so that no list is cut without its cursor.

The runtime never passes an answer over the tool's ``max_output_bytes`` (agentops.runtime.invoke);
an answer cut from outside would lose the tail of its list with no cursor to it, and whoever read
it would take a part for the whole. So a tool that pages (its data says ``has_more`` and
``next_cursor``) measures its answer as the runtime does (``envelope_bytes``) and shrinks its own
page until it fits (``page_fitted``): it then says has_more and gives the cursor after the last
item it kept. The runtime refuses a page it would have to cut rather than pass it on
(``is_page``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

PAGE_FIELDS = ("has_more", "next_cursor")


def envelope_bytes(envelope: Any) -> int:
    """An answer's size as the runtime measures it against the tool's max_output_bytes."""
    return len(json.dumps(envelope, default=str).encode())


def is_page(envelope: dict[str, Any]) -> bool:
    """Whether this answer is one page of a longer list: its data says has_more or
    next_cursor, or the envelope carries a cursor."""
    data = envelope.get("data")
    return bool(envelope.get("next_cursor")) or (
        isinstance(data, dict) and any(name in data for name in PAGE_FIELDS)
    )


def page_fitted(
    count: int, answer: Callable[[int], dict[str, Any]], cap: int
) -> tuple[int, dict[str, Any]]:
    """The answer with the most of ``count`` items that fits ``cap`` bytes, and how many items
    it holds. ``answer(n)`` builds the whole envelope of the first ``n`` items, with has_more and
    next_cursor as ``n`` leaves them (more when ``n < count``, the cursor after item ``n``).
    Every answer returned was measured to fit, except ``answer(0)`` when not even one item fits:
    the caller refuses then (a page of nothing cannot move on)."""
    whole = answer(count)
    if envelope_bytes(whole) <= cap:
        return count, whole
    fits, too_many = 0, count  # answers grow with n: bisect for the last that fits
    best = answer(0)
    while too_many - fits > 1:
        middle = (fits + too_many) // 2
        candidate = answer(middle)
        if envelope_bytes(candidate) <= cap:
            fits, best = middle, candidate
        else:
            too_many = middle
    return fits, best
