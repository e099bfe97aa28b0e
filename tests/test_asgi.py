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
