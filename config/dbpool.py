"""The health check of pooled PostgreSQL sessions (settings: DATABASES OPTIONS pool "check").

psycopg_pool checks a session before handing it out and, when the check fails, discards it and
tries the next one after a backoff that starts at 1 s and doubles. When the database restarts,
fails over or ends the sessions (`pg_terminate_backend`), every idle session of the pool is dead
at once: with five of them the next request waits 0 + 1 + 2 + 4 s ... and fails with
`PoolTimeout` after the pool timeout (10 s), in every process. Here the first dead session makes
the pool check all its idle sessions at once (discarding the dead, opening new ones), so the
next try gets a live session without sleeping through the dead ones.

The check itself costs no round trip while the session's socket is quiet: an idle session the
server ended (a terminated backend, a restart, a failover) has its FATAL message and the end of
the stream waiting on the socket, so a socket with nothing to read, polled without waiting, is
a live session (pgx's CheckConn and Go's MySQL driver check a connection the same way). A
socket with something to read, or a session not idle, gets psycopg_pool's own check: an empty
statement. That statement was one round trip per checkout, in every request and task: ~5% of
the worker's samples in a py-spy profile of approved runs (bench/README.md, "third pass").
"""

from __future__ import annotations

import select
from typing import Any

from psycopg import pq
from psycopg_pool import ConnectionPool


def _quiet(conn: Any) -> bool:
    """An idle session whose socket has nothing to read: the server has not ended it."""
    try:
        if conn.closed or conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return False
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except Exception:  # anything odd about the session: the full check decides
        return False


def check_pooled_connection(conn: Any) -> None:
    if _quiet(conn):
        return
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        from django.db import connections

        for alias in connections:
            pool = getattr(connections[alias], "_connection_pools", {}).get(alias)
            if pool is not None and not pool.closed:
                pool.check()  # the other idle sessions died with this one: replace them now
        raise
