"""The health check of pooled PostgreSQL sessions (settings: DATABASES OPTIONS pool "check").

psycopg_pool checks a session before handing it out and, when the check fails, discards it and
tries the next one after a backoff that starts at 1 s and doubles. When the database restarts,
fails over or ends the sessions (`pg_terminate_backend`), every idle session of the pool is dead
at once: with five of them the next request waits 0 + 1 + 2 + 4 s ... and fails with
`PoolTimeout` after the pool timeout (10 s), in every process. Here the first dead session makes
the pool check all its idle sessions at once (discarding the dead, opening new ones), so the
next try gets a live session without sleeping through the dead ones.
"""

from __future__ import annotations

from typing import Any

from psycopg_pool import ConnectionPool


def check_pooled_connection(conn: Any) -> None:
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        from django.db import connections

        for alias in connections:
            pool = getattr(connections[alias], "_connection_pools", {}).get(alias)
            if pool is not None and not pool.closed:
                pool.check()  # the other idle sessions died with this one: replace them now
        raise
