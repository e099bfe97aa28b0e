"""The product's governed run in one process, as the peers run theirs: bench/peers.py's
`product_in_process`.

    .venv/bin/python bench/product_in_process.py     # started by bench/peers.py, never by hand

The same request as the product's end-to-end system ("book a room on ... for 3 people with a
projector", a demo user each run) goes through the same door (`run_start`) and the same engine:
the rules planner, the gate, the idempotency record, the trace, the tool calls on the tool pool,
the verifier, every row and event in its transaction. What is left out is the transport the
deployed product puts around it: no HTTP request, no token check, and the run's one Celery hop
executed in place (`task_always_eager`, as bench/profile_run.py does), so the figures price the
governed runtime against peers that run in their own process, and the end-to-end `product`
minus this prices the web and the worker hop. Not a way to run the product: the deployed
runtime always goes through Celery.

Answers bench/peers.py's commands like a peer (bench/peer_systems.serve); configuration from
PEERS_CHILD (time zone, days ahead, runs at once; the settings' DATABASE_URL and REDIS_URL).
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peer_systems import Timed, serve  # noqa: E402  (no Django: importable first)


class ProductInProcess(Timed):
    """Runs of the product's two-call booking started with `run_start`, each checked
    succeeded; ``users``: the usernames whose turn it is (bench/cpu_probe's three)."""

    def __init__(self, config: dict[str, Any], users: tuple[str, ...] | None = None) -> None:
        from django.contrib.auth import get_user_model

        from bench.cpu_probe import BOOKING_USERS, Requests

        names = users or BOOKING_USERS
        self.users = {u.username: u for u in get_user_model().objects.filter(username__in=names)}
        self.requests = Requests(config["tz"], days_ahead=config["days_ahead"], users=names)
        self.threads = ThreadPoolExecutor(max_workers=config["concurrent"])

    def run(self) -> str:
        """One run, to its end (its Celery hop executed in place); its id. Raises unless it
        succeeded. The thread's PostgreSQL session goes back to the pool after it, as a
        worker's does after each task."""
        from django.db import close_old_connections, connection

        from agentops.runtime.runs import run_start

        username, text = self.requests.next()
        try:
            run = run_start(user=self.users[username], request_text=text)
            with connection.cursor() as cursor:  # the outcome, as the harness reads the product's
                cursor.execute("SELECT status FROM agentops_agentrun WHERE id = %s", [run.pk])
                (status,) = cursor.fetchone()
        finally:
            close_old_connections()
        if status != "succeeded":
            raise RuntimeError(f"run {run.pk} for {text!r} ended {status}")
        return str(run.pk)


def eager() -> None:
    """The run's Celery hop executed in place, right after the commit that sends it."""
    from config.celery import app

    app.conf.task_always_eager = True


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    eager()
    serve(ProductInProcess(json.loads(os.environ["PEERS_CHILD"])))


if __name__ == "__main__":
    main()
