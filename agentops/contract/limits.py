"""What the runtime accepts and keeps of untrusted input: JSON that PostgreSQL's jsonb can hold,
within depth and length limits, and of a refused call only a digest, never the bytes."""

from __future__ import annotations

import hashlib
from typing import Any

from agentops.contract import canonical_json

MAX_FIELD_NAMES = 20
MAX_FIELD_NAME_CHARS = 40


def json_problem(value: Any, *, max_depth: int, max_string: int) -> str | None:
    """Why this parsed JSON may not go further, or None: nested deeper than ``max_depth``, a
    string or key longer than ``max_string`` characters, or a NUL character or lone surrogate
    anywhere (valid JSON text that jsonb refuses as a whole)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= max_depth:
                return "too_deep"
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, str):
            if len(item) > max_string:
                return "string_too_long"
            if "\x00" in item:
                return "not_storable"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "not_storable"
    return None


def safe_text(value: Any, limit: int = MAX_FIELD_NAME_CHARS) -> str:
    """A short, printable, jsonb-safe rendering of something untrusted (a field name)."""
    text = str(value)[:limit]
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def refused_input(arguments: Any) -> dict[str, Any]:
    """What a refused call keeps of its input: its size, digest and (short) field names. The
    input itself may be a megabyte, or hold what jsonb cannot store."""
    try:
        text = canonical_json(arguments)
    except (ValueError, TypeError, RecursionError):
        text = repr(arguments)
    raw = text.encode("utf-8", "backslashreplace")
    fields = (
        [safe_text(k) for k in list(arguments)[:MAX_FIELD_NAMES]]
        if isinstance(arguments, dict)
        else []
    )
    return {
        "refused_input": {
            "sha256": hashlib.sha256(raw).hexdigest(),
            "bytes": len(raw),
            "type": type(arguments).__name__,
            "fields": fields,
        }
    }
