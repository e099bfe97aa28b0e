"""Where one two-call run spends its CPU: every hop run in this process under cProfile.

The run's Celery tasks are executed eagerly (inline, right after the commit that sends them),
so one profile holds the whole run: the start as POST /api/runs makes it, three planning steps,
the search and the reservation on the tool pool, the verification. Counts the SQL statements
each hop sends (every connection of the process, tool threads included).

    make bench-profile
    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/profile_run.py [--runs 20] [--top 40]

``--approval``: runs with a HIGH call (R16 for e17) that a01 approves at once.
``--no-profile``: the figures alone, without cProfile's own cost in them (for an A/B of CPU per
run); ``--dump FILE``: the profile to FILE, for pstats.

Prints statements per run, CPU ms per run (this process only: PostgreSQL and Redis are not in
it) and the top functions by cumulative and by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("AGENT_RATE_LIMIT_PER_MINUTE", "1000000")
os.environ.setdefault("AGENT_RUN_RATE_LIMIT_PER_MINUTE", "1000000")


# --- runtime entry point: re-point after the runtime's restructure ---------------------------
def start_run(*, user, request_text: str):
    from agentops.runtime.runs import run_start

    return run_start(user=user, request_text=request_text)


# ----------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--approval",
        action="store_true",
        help="runs that book R16 for e17 (a HIGH call): a01 approves each at once, in process",
    )
    parser.add_argument("--no-profile", action="store_true", help="CPU and statements only")
    parser.add_argument("--dump", help="write the profile to this file (pstats format)")
    args = parser.parse_args()

    from bench.cpu_probe import Requests, setup_django

    setup_django()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db.backends import utils

    from agentops.models import AgentRun
    from config.celery import app

    app.conf.task_always_eager = True
    statements: Counter[str] = Counter()
    lock = threading.Lock()
    original = utils.CursorWrapper._execute

    def counting(self, sql, params, *rest):
        with lock:
            statements[" ".join(str(sql).split())[:90]] += 1
        return original(self, sql, params, *rest)

    utils.CursorWrapper._execute = counting
    users = {u.username: u for u in get_user_model().objects.all()}
    requests = Requests(settings.TIME_ZONE, days_ahead=40)

    def one() -> AgentRun:
        username, text = requests.next()
        run = start_run(user=users[username], request_text=text)
        return AgentRun.objects.get(pk=run.pk)

    def approved() -> AgentRun:
        """E17 books R16 (it needs an approval); a01 approves it at once, as the approvals
        page's form does (the service it calls, without the HTTP request)."""
        from approvals.models import ApprovalRequest
        from approvals.services import approval_decide

        _, text = requests.next()
        text = text.replace("a room", "R16").replace(" with a projector", "")
        run = start_run(user=users["e17"], request_text=text)
        pending = ApprovalRequest.objects.get(run_ref=str(run.pk), status="pending")
        approval_decide(request_id=pending.pk, approver=users["a01"], approve=True, reason="bench")
        return AgentRun.objects.get(pk=run.pk)

    run_one = approved if args.approval else one

    for _ in range(3):  # warm imports, schemas, prepared statements
        run_one()
    statements.clear()
    profiler = cProfile.Profile()
    t0, c0 = time.perf_counter(), time.process_time()
    if not args.no_profile:
        profiler.enable()
    runs = [run_one() for _ in range(args.runs)]
    if not args.no_profile:
        profiler.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    not_ok = [r.status for r in runs if r.status != "succeeded"]
    out = io.StringIO()
    if not args.no_profile:
        if args.dump:
            profiler.dump_stats(args.dump)
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
    n = len(runs)
    print(f"runs: {n}, not succeeded: {not_ok}")
    print(
        f"wall ms per run: {wall * 1000 / n:.1f}; CPU ms per run (this process): {cpu * 1000 / n:.1f}"
    )
    print(f"SQL statements per run: {sum(statements.values()) / n:.1f}")
    for sql, count in statements.most_common():
        print(f"  {count / n:5.1f}  {sql}")
    print(out.getvalue())


if __name__ == "__main__":
    main()
