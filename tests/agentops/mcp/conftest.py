"""The real ASGI server (uvicorn, config.asgi) against the test database, and the official MCP
client (``mcp`` 2.x, streamable HTTP) talking to its /mcp endpoint."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from tests.workers import celery_worker_thread, worker  # noqa: F401  (shared)

ROOT = Path(__file__).resolve().parents[3]


def database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgresql://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"server on {port} did not start: {log.read_text()}")
        time.sleep(0.05)


def uvicorn_start(app: str, *, tmp_path: Path, env: dict[str, str], name: str):
    port = free_port()
    log = tmp_path / f"{name}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", app, "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=os.environ | env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_for_port(port, proc, log)
    return proc, port


@pytest.fixture
def mcp_server(transactional_db, tmp_path) -> Any:
    """uvicorn serving config.asgi against the test database; the URL of its /mcp."""
    proc, port = uvicorn_start(
        "config.asgi:application",
        tmp_path=tmp_path,
        name="uvicorn",
        env={
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
            "DJANGO_SETTINGS_MODULE": "config.settings",
        },
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        connection.close()


@asynccontextmanager
async def mcp_client(url: str, token: str | None, *, mode: str = "legacy", **options: Any):
    """The official MCP client over streamable HTTP, with the bearer token as a header: the
    handshake era (2025-11-25) unless ``mode`` says otherwise ("auto" probes server/discover
    and takes 2026-07-28)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,
    ):
        yield client


def run_async(fn: Callable[[], Awaitable[Any]]) -> Any:
    """Run the client side of a test in its own event loop (database calls of the test stay
    outside it, on the test's thread)."""
    return asyncio.run(fn())
