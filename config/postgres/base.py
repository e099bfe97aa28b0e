"""Django's PostgreSQL backend, with a session pool that hands out the session returned last.

psycopg_pool hands out the session that has waited longest (first in, first out). A process
returns its session after every request, task and tool call (config/settings.py), so under FIFO
each checkout gets the next of the pool's sessions in turn, and every session sees a given
statement only once per round of them. A statement is prepared on a session only after
``prepare_threshold`` executions there, so most of the runtime's statements were parsed and
planned again on each call, and each backend's caches stayed cold: PostgreSQL spent 11.6 ms of
CPU per run where a session held for the whole run spent 5.2 (bench/README.md, "eighth pass").
Last in, first out keeps a process on the few sessions it is using (SQLAlchemy's
``pool_use_lifo`` for the same reason), and leaves the idle ones at the far end, where the
pool's ``max_idle`` shrinks it.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool


class LifoConnectionPool(ConnectionPool):
    """psycopg_pool's pool, last in, first out. The pool keeps its idle sessions in a deque,
    returned ones appended on the right, and hands out (and shrinks) from the left; the newest
    is moved to the left just before a checkout takes it, under the pool's lock, so the oldest
    idle session is still the first to be closed when the pool shrinks."""

    def _get_ready_connection(self, timeout: float | None) -> Any:
        self._pool.rotate(1)
        return super()._get_ready_connection(timeout)


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        pool = super().pool
        # Django builds the pool itself (unopened, once per alias); its class is made the LIFO
        # one before a session is taken from it. The subclass adds no state.
        if type(pool) is ConnectionPool:
            pool.__class__ = LifoConnectionPool
        return pool
