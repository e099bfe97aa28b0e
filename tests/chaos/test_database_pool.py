"""A process whose pooled PostgreSQL sessions were all ended (a database restart, a failover,
`pg_terminate_backend`) answers its next query with a new session, instead of sleeping through
the dead ones with psycopg_pool's backoff and failing with PoolTimeout (config/dbpool.py). A live
idle session is handed out without a round trip; an ended one, or one not idle, gets the full
check."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from config import dbpool
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
            # Each waits until its backend has exited, as a restart or failover has long finished
            # when the next request comes.
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))"
            " FROM unnest(%s::int[]) pid",
            [pids],
        ).fetchone()[0]
    assert ended == len(set(pids)) >= 5

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    assert pid not in pids


@pytest.fixture
def full_checks(monkeypatch):
    """Counts psycopg_pool's own check (an empty statement, one round trip)."""
    calls = []
    original = ConnectionPool.check_connection

    def counted(conn):
        calls.append(conn)
        return original(conn)

    monkeypatch.setattr(dbpool.ConnectionPool, "check_connection", staticmethod(counted))
    return calls


def test_a_live_idle_session_is_handed_out_without_a_round_trip(full_checks):
    with psycopg.connect(database_url(), autocommit=True) as conn:
        conn.execute("SELECT 1")
        dbpool.check_pooled_connection(conn)
        assert full_checks == []

        conn.autocommit = False
        conn.execute("SELECT 1")  # a transaction left open: not quiet, so the full check
        with pytest.raises(psycopg.ProgrammingError):  # which refuses it: the pool discards it
            dbpool.check_pooled_connection(conn)
        assert full_checks[0] is conn


def test_an_ended_session_gets_the_full_check_and_is_refused(full_checks):
    conn = psycopg.connect(database_url(), autocommit=True)
    with psycopg.connect(database_url(), autocommit=True) as outsider:
        assert outsider.execute(
            "SELECT pg_terminate_backend(%s, 10000)", [conn.info.backend_pid]
        ).fetchone() == (True,)
    with pytest.raises(psycopg.OperationalError):
        dbpool.check_pooled_connection(conn)
    # The full check found it dead (then the process's pool checked its other idle sessions).
    assert full_checks[0] is conn
    conn.close()
