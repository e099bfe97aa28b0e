from __future__ import annotations

import os
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API in tests

SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.fixture
def demo(db):
    """The demo rooms, users and groups, as `make run` loads them."""
    from bookings.demo import load_demo_data

    load_demo_data()


@pytest.fixture
def e17(demo):
    from accounts.models import User

    return User.objects.get(username="e17")


@pytest.fixture
def e23(demo):
    from accounts.models import User

    return User.objects.get(username="e23")


@pytest.fixture
def approver(demo):
    from accounts.models import User

    return User.objects.get(username="a01")


@pytest.fixture
def admin_user(demo):
    from accounts.models import User

    return User.objects.get(username="admin")


def slot(
    days: int = 2, hour: int = 14, hours: int = 1, minute: int = 0
) -> tuple[datetime, datetime]:
    """A future window in Shanghai time, `days` from today."""
    day = datetime.now(SHANGHAI).date() + timedelta(days=days)
    start = datetime(day.year, day.month, day.day, hour, minute, tzinfo=SHANGHAI)
    return start, start + timedelta(hours=hours)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session", autouse=True)
def _drop_stray_connections(django_db_setup, django_db_blocker):
    """Tool pool threads and worker threads keep connections open; end them before the test
    database is dropped."""
    yield
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
