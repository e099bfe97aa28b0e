"""Real Chromium through Playwright against pytest-django's live server.

CI installs Debian's chromium; a machine without /usr/bin/chromium skips these tests.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection, connections

from config import devservers
from config.run import web_argv

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator:
    """Keep each phase's report on the item, so fixtures can tell whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def _allow_async_unsafe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Playwright's sync API runs the test inside an event loop, where Django refuses database
    calls unless this is set. Only here: everywhere else the check stays on (Django reads the
    variable at call time)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def browser_page(request: pytest.FixtureRequest, live_server) -> Iterator:
    """A fresh Chromium page; on failure a screenshot lands in test-artifacts/."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(
            base_url=live_server.url, viewport={"width": 1200, "height": 900}
        )
        context.set_default_timeout(10_000)
        page = context.new_page()
        try:
            yield page
        finally:
            report = getattr(request.node, "report_call", None)
            if report is None or report.failed:
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
            context.close()
            browser.close()
            # Inside sync_playwright the test runs in another context, hence on another
            # database connection: close it here, or the test database cannot be dropped.
            connections.close_all()


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgresql://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def uvicorn_start(port: int, log: Path) -> subprocess.Popen:
    """uvicorn serving config.asgi on ``port`` against the test database, once it answers."""
    env = os.environ | {
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "SERVE_STATIC": "true",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PORT": str(port),  # the websocket Origin it accepts: http://127.0.0.1:<port>
    }
    proc = subprocess.Popen(
        web_argv("127.0.0.1", port),  # as `make run` starts it
        cwd=ROOT,
        env=env,
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"uvicorn did not start: {log.read_text()}")
        time.sleep(0.1)


def uvicorn_stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=10)


def signed_in(playwright, base_url: str, user, **context_options):
    """Chromium and a new context of it signed in as ``user`` (``context_options`` as
    Playwright's new_context takes them: a locale, a viewport)."""
    from django.test import Client

    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    context = browser.new_context(
        base_url=base_url, **({"viewport": {"width": 1200, "height": 900}} | context_options)
    )
    context.set_default_timeout(20_000)
    # The server process hashes passwords its own way: sign in with a session instead.
    client = Client()
    client.force_login(user)
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base_url}]
    )
    return browser, context


@contextlib.contextmanager
def browsing(base_url: str, user, **context_options) -> Iterator:
    """A Chromium context signed in as ``user`` (skips the test without Chromium); on the way
    out the browser closes and the database work the test did inside Playwright's loop gives
    its connection back to the pool (or it is lost to the tests after this)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser, context = signed_in(playwright, base_url, user, **context_options)
        try:
            yield context
        finally:
            browser.close()
            connections.close_all()


class RestartableServer:
    """uvicorn on one port that a test stops and starts again (its sockets drop, then come
    back on the same URL)."""

    def __init__(self, log: Path) -> None:
        self.port = devservers.free_port()
        self.url, self.log = f"http://127.0.0.1:{self.port}", log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = uvicorn_start(self.port, self.log)

    def stop(self) -> None:
        if self.proc is not None:
            uvicorn_stop(self.proc)
            self.proc = None


@pytest.fixture
def restartable_server(transactional_db, tmp_path):
    server = RestartableServer(tmp_path / "uvicorn.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        connection.close()


@pytest.fixture
def asgi_server(restartable_server):
    """uvicorn serving config.asgi against the test database; its URL."""
    return restartable_server.url


from tests.workers import celery_worker_thread, worker  # noqa: E402, F401  (shared)
