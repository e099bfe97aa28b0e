"""The chaos figures for the benchmark report: runs the tests marked `chaos` (tests/chaos: real
worker processes SIGKILLed, Redis restarted, database sessions terminated, tasks delivered
twice, two sweepers, approvals expiring while queued, two web + two worker processes) with
CHAOS_TRIALS trials each (default here 3), and sums what their invariant checks counted.

    make bench-chaos
    make soak          # at least 1,000 trials over every chaos test, the machine loaded
    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/chaos.py [--trials 3] [--seed N]
        [--total-trials 1000] [--load 2]

``--total-trials N`` spreads at least N trials over the chaos tests that make trials (each gets
the same number);
``--load K`` keeps K other processes busy on the CPU for the whole run (a loaded machine, as
CI's may be), started before the first test and stopped after the last.

Prints one JSON object: trials run, runs, and every violation count (duplicates, lost
bookings, runs left hanging, overlaps, receipts, trace gaps), which must all be 0; per test its
seed, trials and seconds. Exits 1 if a test failed or any count is not 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAOS_PYTEST = (sys.executable, "-m", "pytest", "-m", "chaos", "tests/chaos", "-q")
VIOLATIONS = ("duplicates", "lost_bookings", "hanging", "overlaps", "receipts", "trace_gaps")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=int(os.environ.get("CHAOS_TRIALS", "3")))
    parser.add_argument("--seed", default=os.environ.get("CHAOS_SEED", ""))
    parser.add_argument("--total-trials", type=int, default=0)
    parser.add_argument("--load", type=int, default=0)
    parser.add_argument("--out", default="", help="also write the JSON here (make soak)")
    args = parser.parse_args(argv)
    if args.total_trials:
        args.trials = max(args.trials, -(-args.total_trials // _chaos_tests()))
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)
    ]
    try:
        return _run(args)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def _chaos_tests() -> int:
    """How many chaos tests make trials (those that take the `chaos` fixture): --total-trials
    is spread over them, not over the ones that check a single outage."""
    listed = subprocess.run(
        [*CHAOS_PYTEST, "--fixtures-per-test"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return max(1, sum(1 for line in listed.stdout.splitlines() if line.startswith("chaos -- ")))


def _run(args: argparse.Namespace) -> int:

    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        figures_path = Path(tmp) / "figures.json"
        env = os.environ | {"CHAOS_TRIALS": str(args.trials), "CHAOS_FIGURES": str(figures_path)}
        if args.seed:
            env["CHAOS_SEED"] = str(args.seed)
        started = time.monotonic()
        result = subprocess.run(
            [*CHAOS_PYTEST, "-p", "no:cacheprovider"],
            cwd=ROOT,
            env=env,
            stdout=sys.stderr,  # the pytest output is progress; stdout is the JSON
            check=False,
        )
        seconds = time.monotonic() - started
        per_test = json.loads(figures_path.read_text()) if figures_path.exists() else {}

    totals = {"trials": 0, "runs": 0} | dict.fromkeys(VIOLATIONS, 0)
    for figures in per_test.values():
        for key in totals:
            totals[key] += int(figures.get(key, 0))
    report = {
        "benchmark": "chaos",
        "recorded_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": _commit(),
        "tests": len(per_test),
        "pytest_exit_code": result.returncode,
        "seconds": round(seconds, 1),
        **totals,
        "violations": sum(totals[k] for k in VIOLATIONS),
        "trials_per_test": args.trials,
        "load_processes": args.load,
        "per_test": per_test,
    }
    text = json.dumps(report, indent=2, sort_keys=False)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 1 if result.returncode or report["violations"] or not per_test else 0


def _commit() -> str:
    git = shutil.which("git")
    if git is None:
        return "?"
    done = subprocess.run(
        [git, "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "?"


if __name__ == "__main__":
    sys.exit(main())
