"""The assistant's evaluation set (tests/bookings/assistant/eval_cases.jsonl) on a fresh stack:
understood / wrong / asked per language, and pass^k for k = 1..4 over four repeated runs (a
case passes^k when it passed in all of its first k runs; the rules planner is deterministic, so
pass^4 equals pass^1). Prints JSON; `--failures` also lists what each failing case got.

    make bench-assistant
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "false")
RUNS = int(os.environ.get("ASSISTANT_EVAL_RUNS", "4"))


def main() -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import transaction

    from tests.bookings.assistant.harness import load_cases, run_case, users

    call_command("migrate", verbosity=0)
    cases = load_cases()
    passes: dict[str, list[bool]] = defaultdict(list)
    figures: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    failures = {}
    people = users()  # committed once: each case's own writes are rolled back after it
    for run in range(RUNS):
        for case in cases:
            with transaction.atomic():
                verdict = run_case(case, *people)
                transaction.set_rollback(True)
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
