"""The assistant's evaluation set (tests/bookings/assistant/eval_cases.jsonl) on a fresh stack:
understood / wrong / asked per language, and pass^k for k = 1..4 over four repeated runs (a
case passes^k when it passed in all of its first k runs; the rules planner is deterministic, so
pass^4 equals pass^1). Prints JSON; `--failures` also lists what each failing case got.

End to end by default: every turn of every case is a real run (agentops.services.run_start,
continuing the first turn's conversation) carried out by a real Celery worker (threads, in this
process, on the real Redis broker), and each case's writes are truncated away after it.
`--domain` reads the cases at the domain level instead (the harness's fast path, rolled back).
The per-minute limits on run starts and tool calls are lifted for the benchmark's one asker.

    make bench-assistant                      # ASSISTANT_EVAL_RUNS=1 for one pass
    make bench-assistant BENCH_ARGS="--domain --cases bench/heldout/heldout_1.jsonl"
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "false")
RUNS = int(os.environ.get("ASSISTANT_EVAL_RUNS", "4"))
LIVE = "--domain" not in sys.argv
os.environ["AGENT_RUN_RATE_LIMIT_PER_MINUTE"] = "1000000"
os.environ["AGENT_RATE_LIMIT_PER_MINUTE"] = "1000000"
# Approval mails in memory, not on stdout (the report is the JSON printed at the end).
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")


def run_live(cases, run_case, users):
    from contextlib import ExitStack

    from celery.contrib.testing.worker import start_worker

    from agentops.runtime.redis_client import get_redis
    from config.celery import app
    from tests.bookings.assistant.harness import reset_case_tables

    with ExitStack() as stack:
        stack.enter_context(
            start_worker(
                app, pool="threads", concurrency=4, perform_ping_check=False, loglevel="WARNING"
            )
        )
        for case in cases:
            reset_case_tables()
            get_redis().flushdb()
            yield case, run_case(case, *users(), live=True)
        reset_case_tables()


def run_domain(cases, run_case, users):
    from django.db import transaction

    people = users()  # committed once: each case's own writes are rolled back after it
    for case in cases:
        with transaction.atomic():
            verdict = run_case(case, *people)
            transaction.set_rollback(True)
        yield case, verdict


def _cases_file() -> Path | None:
    """``--cases FILE``: another set in the same format (a held-out set), else the dev set."""
    if "--cases" not in sys.argv:
        return None
    return Path(sys.argv[sys.argv.index("--cases") + 1]).resolve()


def main() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    from tests.bookings.assistant.harness import load_cases, run_case, users

    call_command("migrate", verbosity=0)
    cases = load_cases(_cases_file())
    passes: dict[str, list[bool]] = defaultdict(list)
    figures: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    failures = {}
    started = time.monotonic()
    for run in range(RUNS):
        for case, verdict in (run_live if LIVE else run_domain)(cases, run_case, users):
            passes[case["id"]].append(verdict.understood and not verdict.wrong)
            if run == 0:
                lang = figures[case["lang"]]
                lang["cases"] += 1
                lang["understood"] += verdict.understood
                lang["wrong"] += verdict.wrong
                lang["asked"] += verdict.asked
                if not verdict.understood:
                    failures[case["id"]] = verdict.problems
    total = len(cases)
    report = {
        "mode": "end to end (real runs, Celery worker)" if LIVE else "domain level",
        "seconds": round(time.monotonic() - started, 1),
        "cases": total,
        "per_language": {k: dict(v) for k, v in sorted(figures.items())},
        "understood": sum(v["understood"] for v in figures.values()),
        "wrong": sum(v["wrong"] for v in figures.values()),
        "asked": sum(v["asked"] for v in figures.values()),
        "pass^k": {
            str(k): round(sum(all(p[:k]) for p in passes.values()) / total, 4)
            for k in range(1, RUNS + 1)
        },
    }
    if "--failures" in sys.argv:
        report["failures"] = failures
    print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
