"""The ASGI application `make run` serves: HTTP pages and static files (htmx, the stylesheet)."""

from __future__ import annotations

import asyncio

import pytest


@pytest.fixture
def make_run_app(settings):
    """The application as `make run` builds it: serving its own static files."""
    import importlib

    import config.asgi

    settings.SERVE_STATIC = True
    yield importlib.reload(config.asgi).application
    settings.SERVE_STATIC = False
    importlib.reload(config.asgi)


async def get(path: str, application=None) -> tuple[int, bytes]:
    from asgiref.testing import ApplicationCommunicator

    if application is None:
        from config.asgi import application

    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
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
    body = b""
    while True:
        message = await comm.receive_output(5)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    # The application's end, as a server awaits it: the response is closed after its body.
    await comm.wait(5)
    return start["status"], body


@pytest.mark.parametrize("path", ["/static/css/app.css", "/static/django_htmx/htmx-2.min.js"])
def test_asgi_app_serves_static_files(path, make_run_app):
    status, body = asyncio.run(get(path, make_run_app))
    assert status == 200
    assert len(body) > 100


@pytest.mark.django_db
def test_without_serve_static_a_proxy_serves_them():
    status, _ = asyncio.run(get("/static/css/app.css"))
    assert status == 404


@pytest.mark.django_db(transaction=True)
def test_asgi_app_serves_the_login_page():
    status, body = asyncio.run(get("/login/"))
    assert status == 200
    assert b"<form" in body


# --- config.handler: a request's synchronous work in one trip to a long-lived thread ---------

EVENTS: list[tuple[str, int, bool]] = []  # (what, thread id, holds a database session)


def _note(what: str) -> None:
    import threading

    from django.db import connection

    EVENTS.append((what, threading.get_ident(), connection.connection is not None))


def _on_started(**kwargs) -> None:
    _note("started")


def _on_finished(**kwargs) -> None:
    _note("finished")  # connected after close_old_connections: runs after it


def thread_view(request):
    from django.db import connection
    from django.http import HttpResponse

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    _note("view")
    return HttpResponse("ok")


def stream_view(request):
    from django.db import connection
    from django.http import StreamingHttpResponse

    def parts():
        for n in range(3):
            with connection.cursor() as cursor:
                cursor.execute("SELECT %s", [n])
                (value,) = cursor.fetchone()
            _note("part")
            yield f"part{value};"

    return StreamingHttpResponse(parts(), content_type="text/plain")


def async_stream_view(request):
    """As the audit export streams under ASGI: an async iterator whose pieces are read by
    thread-sensitive sync_to_async calls."""
    from asgiref.sync import sync_to_async
    from django.db import connection
    from django.http import StreamingHttpResponse

    def part(n: int) -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s", [n])
            (value,) = cursor.fetchone()
        _note("part")
        return f"part{value};"

    async def parts():
        for n in range(3):
            yield await sync_to_async(part, thread_sensitive=True)(n)

    _note("view")
    return StreamingHttpResponse(parts(), content_type="text/plain")


def broken_stream_view(request):
    from django.db import connection
    from django.http import StreamingHttpResponse

    def parts():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        yield "a"
        raise RuntimeError("the stream broke")

    return StreamingHttpResponse(parts(), content_type="text/plain")


urlpatterns = []  # filled below: this module is the URLconf of the handler tests


def _urls():
    from django.urls import path

    return [
        path("thread/", thread_view),
        path("stream/", stream_view),
        path("astream/", async_stream_view),
        path("broken/", broken_stream_view),
    ]


@pytest.fixture
def handler_urls(settings):
    from django.core import signals

    urlpatterns[:] = _urls()
    settings.ROOT_URLCONF = __name__
    EVENTS.clear()
    signals.request_started.connect(_on_started)
    signals.request_finished.connect(_on_finished)
    yield
    signals.request_started.disconnect(_on_started)
    signals.request_finished.disconnect(_on_finished)


@pytest.mark.django_db(transaction=True)
def test_a_request_runs_its_receivers_view_and_close_on_one_reused_thread(handler_urls):
    import threading

    for _ in range(2):
        status, body = asyncio.run(get("/thread/"))
        assert (status, body) == (200, b"ok")
    assert [what for what, _, _ in EVENTS] == ["started", "view", "finished"] * 2
    first, second = {t for _, t, _ in EVENTS[:3]}, {t for _, t, _ in EVENTS[3:]}
    assert len(first) == 1 and len(second) == 1  # one thread per request, never the loop's
    assert threading.get_ident() not in first | second
    names = {t.name for t in threading.enumerate() if t.ident in first | second}
    assert names and all(name.startswith("web-request") for name in names)  # kept, not joined
    # The view held a database session; by request_finished it was back in the pool.
    assert [held for what, _, held in EVENTS if what != "started"] == [True, False] * 2


@pytest.mark.django_db(transaction=True)
def test_a_streamed_response_is_read_on_the_request_thread_then_closed(handler_urls):
    status, body = asyncio.run(get("/stream/"))
    assert (status, body) == (200, b"part0;part1;part2;")
    assert [what for what, _, _ in EVENTS] == ["started", "part", "part", "part", "finished"]
    assert len({t for _, t, _ in EVENTS}) == 1
    assert EVENTS[-1][2] is False  # the session the parts used went back to the pool


@pytest.mark.django_db(transaction=True)
def test_an_async_stream_reads_and_closes_on_one_thread_and_gives_its_session_back(handler_urls):
    status, body = asyncio.run(get("/astream/"))
    assert (status, body) == (200, b"part0;part1;part2;")
    assert [what for what, _, _ in EVENTS] == [
        "started",
        "view",
        "part",
        "part",
        "part",
        "finished",
    ]
    reader = {t for what, t, _ in EVENTS if what in ("part", "finished")}
    assert len(reader) == 1  # every piece and the close on one thread of the request's own
    assert EVENTS[-1][2] is False  # whose session went back to the pool at request_finished


@pytest.mark.django_db(transaction=True)
def test_a_stream_that_breaks_still_finishes_the_request(handler_urls):
    with pytest.raises(RuntimeError, match="the stream broke"):
        asyncio.run(get("/broken/"))
    assert [what for what, _, _ in EVENTS] == ["started", "finished"]
    assert len({t for _, t, _ in EVENTS}) == 1
    assert EVENTS[-1][2] is False
