"""Reads the runtime's checks of one call share.

A call's checks each ask a tool's hooks for the state they depend on: the gate its risk (a
room's approval flag and department), an approval its binding (the room's schedule version
and facts) and its summary (the room's name). Each hook reading on its own read the same row
up to four times in one transaction. While the runtime checks one call it opens
``call_reads()``; a hook's ``read_once(key, load)`` then loads once and hands the same value to
every later check of that call, so the checks also agree on one state of the facts.

The runtime opens the scope only around code that reads what its hooks read and writes none
of it (the gate, the approval's opening and binding, the precheck before a call): the call
itself and anything after it read afresh. Outside a scope ``read_once`` just loads. The memo
is a context variable: each thread (the tool pool's included) has its own.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_memo: ContextVar[dict[Hashable, Any] | None] = ContextVar("agentops_call_reads", default=None)


@contextmanager
def call_reads() -> Iterator[None]:
    """Within it, ``read_once`` loads each key once. Nested, it is the outer scope's."""
    if _memo.get() is not None:
        yield
        return
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


def read_once[T](key: Hashable, load: Callable[[], T]) -> T:
    """``load()``, or within ``call_reads()`` what it gave for ``key`` the first time."""
    memo = _memo.get()
    if memo is None:
        return load()
    if key not in memo:
        memo[key] = load()
    value: T = memo[key]
    return value
