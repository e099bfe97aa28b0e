"""A process whose pooled PostgreSQL sessions were all ended (a database restart, a failover,
`pg_terminate_backend`) answers its next query with a new session, instead of sleeping through
the dead ones with psycopg_pool's backoff and failing with PoolTimeout (config/dbpool.py)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from tests.chaos.stack import database_url

pytestmark = [pytest.mark.chaos, pytest.mark.django_db(transaction=True)]


def test_the_next_query_after_every_pooled_session_died_succeeds():
    if not connection.settings_dict["OPTIONS"].get("pool"):
        pytest.skip("no connection pool (DB_POOL_MAX_SIZE=0)")
    connection.close()  # Django's own session goes back to the pool too
    pool = connection.pool
    # Every idle session of this process's pool, and a few more, as far as the pool's maximum
    # allows (the suite's concurrency tests may have grown it near its cap): all of them end.
    stats = pool.get_stats()
    in_use = stats.get("pool_size", 0) - stats.get("pool_available", 0)
    held = [pool.getconn() for _ in range(min(stats["pool_available"] + 5, pool.max_size - in_use))]
    pids = [conn.info.backend_pid for conn in held]
    for conn in held:
        pool.putconn(conn)
    with psycopg.connect(database_url(), autocommit=True) as outsider:
        ended = outsider.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM unnest(%s::int[]) pid",
            [pids],
        ).fetchone()[0]
    assert ended == len(set(pids)) >= 5

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    assert pid not in pids
