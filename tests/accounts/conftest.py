"""Typed text is checked on every channel (test_typed.py): the real Celery worker and the MCP
server the other apps' tests use."""

from tests.agentops.mcp.conftest import mcp_server  # noqa: F401
from tests.workers import celery_worker_thread, worker  # noqa: F401
