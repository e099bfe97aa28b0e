"""DJANGO_PROFILE=production: `manage.py check --deploy` is clean under it, and it refuses to
start with DEBUG or a development secret. Each in a fresh process with only that environment."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from accounts.middleware import RENEWED_AT

ROOT = Path(__file__).resolve().parent.parent


def production_env(**changes: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k in {"PATH", "HOME", "LANG", "VIRTUAL_ENV", "PYTHONPATH", "TMPDIR"}
    }
    return (
        env
        | {
            "DJANGO_PROFILE": "production",
            "DATABASE_URL": settings.DATABASE_URL,  # never dialled by `check` without --database
            "REDIS_URL": settings.REDIS_URL,
            "SECRET_KEY": secrets.token_urlsafe(60),
            "APPROVAL_SIGNING_KEYS": f"k7:{secrets.token_urlsafe(40)}",
            "ALLOWED_HOSTS": "rooms.example",
            "EMAIL_HOST": "smtp.rooms.example",
        }
        | changes
    )


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_deploy_is_clean_under_the_production_profile():
    done = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_the_production_profile_turns_on_tls_cookies_hsts_and_the_proxy_header():
    code = (
        "from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE,"
        " s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS,"
        " s.SECURE_PROXY_SSL_HEADER, s.SESSION_COOKIE_AGE, s.DEBUG)"
    )
    done = manage("shell", "-c", code, env=production_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == (
        "True True True 31536000 True ('HTTP_X_FORWARDED_PROTO', 'https') 1800 False"
    )


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"DEBUG": "true"}, "DEBUG is on"),
        ({"SECRET_KEY": "dev-only-insecure-key-change-me"}, "SECRET_KEY"),
        ({"SECRET_KEY": "short"}, "SECRET_KEY"),
        ({"APPROVAL_SIGNING_KEYS": "k1:dev-only-approval-key"}, "APPROVAL_SIGNING_KEYS"),
        ({"APPROVAL_SIGNING_KEYS": "k2:x,k1:dev-only-approval-key"}, "APPROVAL_SIGNING_KEYS"),
        ({"MCP_INSECURE_DEMO_USER": "e17"}, "MCP_INSECURE_DEMO_USER"),
        ({"MCP_CONFORMANCE_FIXTURES": "true"}, "MCP_CONFORMANCE_FIXTURES"),
    ],
)
def test_the_production_profile_refuses_to_start_with_development_settings(changes, reason):
    done = manage("check", env=production_env(**changes))
    assert done.returncode != 0
    assert "DJANGO_PROFILE=production refuses to start" in done.stderr
    assert reason in done.stderr


def test_without_secret_key_the_production_profile_refuses_to_start():
    env = production_env()
    del env["SECRET_KEY"]
    done = manage("check", env=env)
    assert done.returncode != 0 and "SECRET_KEY" in done.stderr


@pytest.mark.django_db
def test_an_idle_session_ends_and_an_active_one_is_renewed(e17, settings):
    settings.SESSION_COOKIE_AGE = 3600
    settings.SESSION_RENEW_SECONDS = 60
    client = Client()
    client.force_login(e17)
    assert client.get("/bookings/").status_code == 200
    session = client.session
    first = session[RENEWED_AT]
    assert abs(first - time.time()) < 5
    # Once the last renewal is older than SESSION_RENEW_SECONDS, a request renews the expiry.
    from django.contrib.sessions.models import Session

    row = Session.objects.get(session_key=session.session_key)
    expiry = row.expire_date
    session[RENEWED_AT] = first - 120
    session.save()
    assert client.get("/bookings/").status_code == 200
    renewed = Session.objects.get(session_key=session.session_key)
    assert renewed.expire_date > expiry
    assert client.session[RENEWED_AT] >= first
    # Idle past the age: the session is gone and the page asks to sign in.
    Session.objects.filter(session_key=session.session_key).update(
        expire_date=renewed.expire_date.replace(year=2000)
    )
    assert client.get("/bookings/").status_code == 302
