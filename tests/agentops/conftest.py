"""The runtime's tests share the real Celery worker fixtures (tests/workers.py); the fuzz's
counts are reported at the end of the session (tests/agentops/fuzzing.py)."""

from __future__ import annotations

import pytest

from tests.workers import celery_worker_thread, worker  # noqa: F401


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.agentops.fuzzing import REPORT

    if not REPORT:
        return
    terminalreporter.section("fuzz: payloads that reached validation")
    for name in sorted(REPORT):
        terminalreporter.write_line(REPORT[name].line())
    payloads = sum(t.payloads for t in REPORT.values())
    reached = sum(t.reached for t in REPORT.values())
    errors = sum(t.server_errors for t in REPORT.values())
    terminalreporter.write_line(
        f"in all: {reached} of {payloads} payloads reached validation over {len(REPORT)} "
        f"tools and routes, {errors} answers of 5xx"
    )
