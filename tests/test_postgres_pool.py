"""The PostgreSQL session pool is last in, first out (config/postgres/base.py): a process that
returns its session after each piece of work gets the same one back, with its prepared
statements, instead of the next of the pool's sessions in turn."""

from __future__ import annotations

import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from config.postgres.base import LifoConnectionPool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool():
    pool = LifoConnectionPool(
        kwargs=connection.get_connection_params() | {"autocommit": True},
        min_size=3,
        max_size=3,
        open=False,
    )
    pool.open(wait=True, timeout=30)
    yield pool
    pool.close()


def test_the_pool_hands_out_the_session_returned_last_and_keeps_the_oldest_last(pool):
    a, b, c = (pool.getconn() for _ in range(3))
    for conn in (a, b, c):
        pool.putconn(conn)

    first = pool.getconn()
    pool.putconn(first)
    again = pool.getconn()
    rest = [pool.getconn(), pool.getconn()]
    for conn in (again, *rest):
        pool.putconn(conn)

    assert first is c
    assert again is c
    assert rest == [b, a]  # the oldest idle session stays at the end the pool shrinks from


def test_django_takes_the_same_session_again_after_giving_it_back():
    if not connection.settings_dict["OPTIONS"].get("pool"):
        pytest.skip("no connection pool (DB_POOL_MAX_SIZE=0)")
    connection.close()
    pool = connection.pool
    # Two more idle sessions ahead of whatever this process's pool already holds: under first
    # in, first out the next checkout would take an older one.
    held = [pool.getconn(), pool.getconn()]
    for conn in held:
        pool.putconn(conn)

    pids = []
    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pids.append(cursor.fetchone()[0])
        connection.close()  # back to the pool, as after every request, task and tool call

    assert type(pool) is LifoConnectionPool
    assert isinstance(pool, ConnectionPool)
    assert pids == [held[1].info.backend_pid] * 3
