"""The ASGI application `make run` serves: HTTP pages and static files (htmx, the stylesheet)."""

from __future__ import annotations

import asyncio

import pytest


async def get(path: str) -> tuple[int, bytes]:
    from asgiref.testing import ApplicationCommunicator

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
def test_asgi_app_serves_static_files(path):
    status, body = asyncio.run(get(path))
    assert status == 200
    assert len(body) > 100


@pytest.mark.django_db(transaction=True)
def test_asgi_app_serves_the_login_page():
    status, body = asyncio.run(get("/login/"))
    assert status == 200
    assert b"<form" in body
