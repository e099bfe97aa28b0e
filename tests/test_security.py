"""The edge: secrets masked in error reports, websocket origins matched exactly, header limits
held by the server `make run` starts, static paths that climb out answer 404, and the
supervisor of `make run` restarting a worker that died."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client, RequestFactory
from django.views.debug import ExceptionReporter, get_default_exception_reporter_filter

from config import run
from config.security import origin_allowed

ROOT = Path(__file__).resolve().parents[1]
SECRETS = {
    "DATABASE_URL": "postgres://app:hunter2@db.internal:5432/rooms",
    "REDIS_URL": "redis://:s3cret@cache.internal:6379/0",
    "OPENAI_API_KEY": "sk-live-do-not-show",
    "APPROVAL_SIGNING_KEYS": "k1:approval-signing-secret",
    "SECRET_KEY": "django-secret-do-not-show",
    "OPENAI_BASE_URL": "https://llm.internal/v1",
}


@pytest.fixture
def secret_settings(settings):
    for name, value in SECRETS.items():
        setattr(settings, name, value)
    settings.CELERY_BROKER_URL = SECRETS["REDIS_URL"]
    settings.CACHES = {"default": {"BACKEND": "x", "LOCATION": SECRETS["REDIS_URL"]}}
    settings.CHANNEL_LAYERS = {"default": {"CONFIG": {"hosts": [SECRETS["REDIS_URL"]]}}}
    settings.SOME_ODD_NAME = {"nested": ["postgres://u:pw@h/db"]}
    return settings


def _leaks(text: str) -> list[str]:
    return [s for s in [*SECRETS.values(), "hunter2", "s3cret", "u:pw@h"] if s in text]


def test_error_reports_mask_every_url_and_secret_setting(secret_settings):
    safe = get_default_exception_reporter_filter().get_safe_settings()

    assert _leaks(repr(safe)) == []
    for name in [*SECRETS, "CELERY_BROKER_URL"]:
        assert safe[name] == "********************"
    assert safe["CACHES"]["default"]["BACKEND"] == "x"  # what is no secret stays readable


def test_the_debug_page_a_developer_opts_into_shows_no_secret(secret_settings):
    request = RequestFactory().get("/api/tools")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        html = ExceptionReporter(request, *sys.exc_info()).get_traceback_html()

    assert "boom" in html
    assert _leaks(html) == []


# --- websocket origins ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://127.0.0.1:8000", True),
        ("http://localhost:8000", True),
        ("HTTP://LOCALHOST:8000", True),
        ("http://127.0.0.1:8001", False),
        ("http://127.0.0.1", False),
        ("http://localhost:9999", False),
        ("https://127.0.0.1:8000", False),
        ("http://127.0.0.1:8000.evil.example", False),
        ("http://127.0.0.1:8000/path", False),
        ("http://evil.example:8000", False),
        ("null", False),
        ("", False),
        ("http://127.0.0.1:99999", False),
    ],
)
def test_websocket_origins_match_scheme_host_and_port_exactly(origin, allowed):
    allowed_origins = ["http://127.0.0.1:8000", "http://localhost:8000"]
    assert origin_allowed(origin, allowed_origins) is allowed


def test_default_ports_are_explicit():
    assert origin_allowed("https://rooms.example", ["https://rooms.example:443"])
    assert not origin_allowed("https://rooms.example", ["http://rooms.example"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("origin", "connects"),
    [
        (b"http://127.0.0.1:8000", True),
        (b"http://127.0.0.1:8001", False),
        (b"http://localhost:1234", False),
        (b"https://127.0.0.1:8000", False),
        (None, False),
    ],
)
def test_the_inbox_websocket_accepts_only_its_own_origin(origin, connects, approver, settings):
    from config.asgi import application

    settings.WEBSOCKET_ALLOWED_ORIGINS = ["http://127.0.0.1:8000"]
    client = Client()
    client.force_login(approver)
    headers = [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]
    if origin is not None:
        headers.append((b"origin", origin))

    async def scenario():
        comm = WebsocketCommunicator(application, "/ws/approvals/", headers=headers)
        connected, _ = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected

    assert asyncio.run(scenario()) is connects


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "path", ["/ws/runs/not-a-uuid/", "/ws/nothing-here/", "/", "/ws/approvals/x/", "/ws/runs/%00/"]
)
@pytest.mark.parametrize("signed_in", [True, False])
def test_a_websocket_to_a_path_no_consumer_serves_is_refused_cleanly(path, signed_in, e17):
    from config.asgi import application

    headers = [(b"origin", settings.WEBSOCKET_ALLOWED_ORIGINS[0].encode())]
    if signed_in:
        client = Client()
        client.force_login(e17)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))

    async def scenario():
        comm = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await comm.connect(timeout=5)
        await comm.wait(5)  # the application ended, raising nothing
        return connected, code

    assert asyncio.run(scenario()) == (False, 4404)


# --- headers and static paths through the ASGI app ----------------------------------------------


async def _asgi_get(path: str, headers: list[tuple[bytes, bytes]], application) -> int:
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
    }
    comm = ApplicationCommunicator(application, scope)
    await comm.send_input({"type": "http.request", "body": b""})
    start = await comm.receive_output(5)
    return start["status"]


@pytest.fixture
def served_app(settings):
    """The application as `make run` builds it (serving static files)."""
    import importlib

    import config.asgi

    settings.SERVE_STATIC = True
    yield importlib.reload(config.asgi).application
    settings.SERVE_STATIC = False
    importlib.reload(config.asgi)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ([(f"x-h{i}".encode(), b"v") for i in range(1000)], 431),
        ([(b"x-big", b"a" * 40_000)], 431),
        ([(b"x-small", b"a" * 100)], 200),
    ],
)
def test_too_many_or_too_large_headers_are_431(headers, status, served_app):
    assert asyncio.run(_asgi_get("/login/", headers, served_app)) == status


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/static/../config/settings.py",
        "/static/../../etc/passwd",
        "/static/css/../../../manage.py",
        "/static/css/\x00.css",
        "/static/%2e%2e/config/settings.py",
    ],
)
def test_static_paths_that_climb_out_are_404(path, served_app):
    assert asyncio.run(_asgi_get(path, [], served_app)) == 404


# --- the real server `make run` starts ------------------------------------------------------------


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"uvicorn did not listen on {port} within {timeout}s")


def _raw_request(port: int, request: bytes) -> bytes:
    """The status line, or b'' when the server closed the connection instead."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(request)
            return s.recv(4096).split(b"\r\n", 1)[0]
        except (ConnectionResetError, BrokenPipeError):
            return b""


@pytest.fixture
def make_run_server(db, tmp_path):
    """uvicorn started with the options of `make run` (config.run.web_argv)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = os.environ | {
        "DATABASE_URL": settings.DATABASE_URL,
        "REDIS_URL": settings.REDIS_URL,
        "SERVE_STATIC": "true",
    }
    log = (tmp_path / "uvicorn.log").open("w")
    proc = subprocess.Popen(
        run.web_argv("127.0.0.1", port), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        _wait_for_port(port, proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_make_run_server_refuses_huge_and_numerous_headers(make_run_server):
    port = make_run_server
    head = b"GET /static/css/app.css HTTP/1.1\r\nHost: 127.0.0.1\r\n"

    assert _raw_request(port, head + b"\r\n") == b"HTTP/1.1 200 OK"
    huge = _raw_request(port, head + b"X-Big: " + b"a" * 4_000_000 + b"\r\n\r\n")
    assert huge in (b"", b"HTTP/1.1 431 Request Header Fields Too Large")
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(1000))
    assert _raw_request(port, head + many + b"\r\n").startswith(b"HTTP/1.1 431")
    escaped = b"GET /static/%2e%2e/config/settings.py HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    assert _raw_request(port, escaped).startswith(b"HTTP/1.1 404")


def test_the_make_run_server_refuses_a_head_that_never_ends_without_waiting_for_it(
    make_run_server,
):
    """httptools alone buffers a header of any length; config.webserver answers once the head
    passes its bound, while the client is still sending it."""
    with socket.create_connection(("127.0.0.1", make_run_server), timeout=10) as s:
        s.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        sent = 0
        while not select.select([s], [], [], 0.05)[0]:  # until the server answers
            assert sent < 64 * 1024, "the server is still reading a 64 KB head"
            s.sendall(b"a" * 4096)
            sent += 4096
        assert s.recv(4096).startswith(b"HTTP/1.1 431")
    assert 32 * 1024 < sent + 40 <= 40 * 1024  # answered just past the bound


def _send_in_pieces(s: socket.socket, data: bytes, pieces: int) -> None:
    """Send ``data`` as ``pieces`` reads of the server, pausing between them."""
    step = -(-len(data) // pieces)
    for i in range(0, len(data), step):
        s.sendall(data[i : i + step])
        time.sleep(0.05)


def _read_reply(s: socket.socket) -> bytes:
    """One whole response on a kept-alive connection; its status line."""
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += s.recv(65536)
    head, body = reply.split(b"\r\n\r\n", 1)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += s.recv(65536)
    return head.split(b"\r\n", 1)[0]


def test_the_make_run_server_bounds_each_head_not_a_connection_or_a_body(make_run_server):
    """On one kept-alive connection: heads of 20 KB, each arriving in three reads, one after the
    other (64 KB of heads in all); then a 200 KB body in four reads; then a small request. The
    app answers every one: the bound counts each head alone, and never a body."""
    big = b"X-Pad: " + b"p" * 20_000 + b"\r\n"
    get = b"GET /static/css/app.css HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    form = b"note=" + b"n" * 200_000
    post = (
        b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % len(form)
    )
    with socket.create_connection(("127.0.0.1", make_run_server), timeout=10) as s:
        for _ in range(3):
            _send_in_pieces(s, get + big + b"\r\n", 3)
            assert _read_reply(s) == b"HTTP/1.1 200 OK"
        s.sendall(post)
        time.sleep(0.05)
        _send_in_pieces(s, form, 4)
        assert _read_reply(s) == b"HTTP/1.1 403 Forbidden"  # the app's CSRF refusal, read whole
        s.sendall(get + b"\r\n")
        assert _read_reply(s) == b"HTTP/1.1 200 OK"


# --- the supervisor of `make run` -------------------------------------------------------------------

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def _wait_exit(proc: subprocess.Popen, timeout: float = 10) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"process {proc.pid} did not exit within {timeout}s") from exc


def test_a_worker_that_dies_is_started_again_and_the_web_server_stays_up():
    worker, web = run.Child("Celery worker", SLEEPER), run.Child("web server", SLEEPER)
    lines: list[str] = []
    supervisor = run.Supervisor([worker, web], env=dict(os.environ), log=lines.append)
    supervisor.start()
    try:
        first_worker, web_process = worker.process, web.process
        first_worker.send_signal(signal.SIGKILL)
        _wait_exit(first_worker)

        assert supervisor.check() is True
        assert worker.process is not first_worker
        assert worker.process.poll() is None
        assert web.process is web_process and web_process.poll() is None
        assert supervisor.alive()
        assert lines == [f"The Celery worker exited ({-signal.SIGKILL}); starting it again."]
    finally:
        supervisor.stop()
    assert worker.process.poll() is not None and web.process.poll() is not None


def test_a_child_that_keeps_dying_stops_the_launcher_instead_of_looping():
    now = [0.0]
    crashing = run.Child("Celery worker", [sys.executable, "-c", "raise SystemExit(3)"])
    supervisor = run.Supervisor(
        [crashing], env=dict(os.environ), clock=lambda: now[0], log=lambda _: None
    )
    supervisor.start()
    verdicts = []
    for _ in range(run.MAX_RESTARTS + 1):
        _wait_exit(crashing.process)
        verdicts.append(supervisor.check())
        now[0] += 1.0
    assert verdicts == [True] * run.MAX_RESTARTS + [False]

    # Restarts spread out over more than the window are forgiven.
    now[0] += run.RESTART_WINDOW_S
    assert supervisor.check() is True
    supervisor.stop()


# --- Content-Security-Policy and the security headers on every answer ------------------------------


async def _asgi_head(path: str, application, method: str = "GET") -> dict[bytes, bytes]:
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
    }
    comm = ApplicationCommunicator(application, scope)
    await comm.send_input({"type": "http.request", "body": b""})
    start = await comm.receive_output(5)
    return {name.lower(): value for name, value in start["headers"]}


@pytest.mark.django_db(transaction=True)
def test_every_html_page_has_a_nonce_policy_without_unsafe_inline(served_app):
    headers = asyncio.run(_asgi_head("/login/", served_app))

    policy = headers[b"content-security-policy"].decode()
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["default-src"] == "'self'"
    assert "'nonce-" in directives["script-src"] and "'nonce-" in directives["style-src"]
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert directives["frame-ancestors"] == "'none'"


@pytest.mark.django_db(transaction=True)
def test_a_pages_inline_script_carries_the_nonce_of_its_policy(client, approver):
    client.force_login(approver)
    response = client.get("/approvals/")

    policy = response["Content-Security-Policy"]
    nonce = policy.split("'nonce-", 1)[1].split("'", 1)[0]
    page = response.content.decode()
    assert f'<script nonce="{nonce}">' in page
    assert f'"inlineStyleNonce": "{nonce}"' in page  # htmx's own indicator style
    assert "hx-on" not in page  # htmx runs with eval off: no inline handlers


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("path", "method"), [("/static/css/app.css", "GET"), ("/mcp", "POST")])
def test_static_files_and_mcp_carry_the_security_headers(path, method, served_app):
    headers = asyncio.run(_asgi_head(path, served_app, method))

    assert headers[b"x-content-type-options"] == b"nosniff"
    assert headers[b"referrer-policy"] == b"same-origin"
    assert headers[b"x-frame-options"] == b"DENY"
    assert headers[b"content-security-policy"] == b"default-src 'none'; frame-ancestors 'none'"
