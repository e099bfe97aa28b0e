"""bench/peers.py measures its peers on the product's own booking table: the same exclusion
constraint, the same unique key, the same search statement. Held to the product's migration
here (the peer packages are not needed: bench/peer_systems.py imports them only in a peer's
own process)."""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
import pytest
from django.db import IntegrityError, connection

from bench import peer_systems, peers
from bookings.models import Room

pytestmark = pytest.mark.django_db

CHECKED = ("booking_no_overlap", "booking_attendees_positive", "booking_during_not_empty")


def _constraints(schema: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c"
            " JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace"
            " WHERE n.nspname = %s AND t.relname = 'bookings_booking'",
            [schema],
        )
        return dict(cursor.fetchall())


def _unique_columns(schema: str) -> set[str]:
    """Columns of bookings_booking with a unique index of their own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid"
            " JOIN pg_namespace n ON n.oid = t.relnamespace"
            " JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0]"
            " WHERE n.nspname = %s AND t.relname = 'bookings_booking' AND i.indisunique"
            " AND i.indnatts = 1 AND NOT i.indisprimary",
            [schema],
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.fixture
def peer_schema() -> str:
    """The peers' schema, built by bench/peers.py's statements in a schema of its own, first
    on the search path (the test's transaction rolls it back)."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA peers_check")
        cursor.execute("SET LOCAL search_path = peers_check, public")
        for statement in peer_systems.PEER_SCHEMA:
            cursor.execute(statement)
    return "peers_check"


def test_peer_booking_table_has_the_products_constraints(peer_schema):
    product, peer = _constraints("public"), _constraints(peer_schema)

    assert set(CHECKED) <= set(product)
    assert {name: peer.get(name) for name in CHECKED} == {name: product[name] for name in CHECKED}
    assert "EXCLUDE USING gist (room_id WITH =, during WITH &&)" in peer["booking_no_overlap"]
    assert "idempotency_key" in _unique_columns("public")
    assert "idempotency_key" in _unique_columns(peer_schema)


def test_peer_room_table_has_the_columns_the_product_search_selects(peer_schema):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = 'bookings_room' ORDER BY ordinal_position",
            [peer_schema],
        )
        columns = [row[0] for row in cursor.fetchall()]

    assert columns == [f.column for f in Room._meta.concrete_fields]
    assert peer_systems.ROOM_COLUMNS.replace(" ", "").split(",") == columns


def test_peer_schema_runs_the_search_and_refuses_an_overlap_and_a_used_key(peer_schema):
    start = datetime.fromisoformat("2030-01-07T10:00:00+08:00")
    request = {
        "start": start.isoformat(),
        "end": (start + timedelta(hours=1)).isoformat(),
        "attendees": 3,
        "equipment": ["projector"],
        "user": 1,
    }
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO bookings_room ({peer_systems.ROOM_COLUMNS}) VALUES"
            " (1, 'R7', 'Atlas', 4, '{projector}', 'Engineering', 1, '', true, false, 0, false,"
            " true)"
        )
        cursor.execute(peers.product_search_sql(), peer_systems.search_params(request))
        found = [row[1] for row in cursor.fetchall()]
        cursor.execute(peer_systems.BOOK_SQL, peer_systems.book_params(request, 1, "k1"))
        cursor.execute(peers.product_search_sql(), peer_systems.search_params(request))
        after = cursor.fetchall()
        cursor.execute("SAVEPOINT overlap")
        with pytest.raises(IntegrityError) as overlap:
            cursor.execute(peer_systems.BOOK_SQL, peer_systems.book_params(request, 1, "k2"))
        cursor.execute("ROLLBACK TO SAVEPOINT overlap")
        later = request | {"start": request["end"], "end": (start + timedelta(hours=2)).isoformat()}
        with pytest.raises(IntegrityError) as reused:
            cursor.execute(peer_systems.BOOK_SQL, peer_systems.book_params(later, 1, "k1"))

    assert found == ["R7"]
    assert after == []
    assert isinstance(overlap.value.__cause__, psycopg.errors.ExclusionViolation)
    assert isinstance(reused.value.__cause__, psycopg.errors.UniqueViolation)


@pytest.mark.django_db(transaction=True)
def test_the_in_process_system_books_through_the_whole_governed_run(rooms, e17):
    """bench/product_in_process.py's runs go through run_start and every step of the engine,
    its one Celery hop executed in place: each books once, verified, as the worker's would."""
    from agentops.models import AgentRun
    from bench.product_in_process import ProductInProcess, eager
    from bookings.models import Booking
    from config.celery import app

    was = app.conf.task_always_eager
    system = ProductInProcess(
        {"tz": "Asia/Shanghai", "days_ahead": 3, "concurrent": 2}, users=("e17",)
    )
    try:
        eager()
        one = system.timed()
        two = system.batch(2)
    finally:
        app.conf.task_always_eager = was
        system.close()

    runs = list(AgentRun.objects.order_by("created_at"))
    bookings = Booking.objects.filter(requester=e17, status="confirmed")
    assert one > 0
    assert len(two) == 2
    assert [r.status for r in runs] == ["succeeded"] * 3
    assert bookings.count() == 3
    assert {b.room.code for b in bookings} <= {"R5", "R7", "R9"}
    for run in runs:
        kinds = list(run.events.values_list("kind", flat=True))
        assert "verified" in kinds
