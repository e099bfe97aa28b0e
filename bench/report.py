"""`make bench`: every benchmark, one report.

BENCHMARKS below is the one list of them: adding a benchmark is one line (its script must
print one JSON object on stdout and exit non-zero when a target it guards is broken). Each runs
on throwaway embedded PostgreSQL and Redis of its own (`config.devservers exec --fresh --fast`,
under var/bench-<name>), one after another. The report holds every figure each printed, the
headline figures (ratios against the baselines each measured in the same run), how each ended,
and the machine: cores, memory, load, Python, PostgreSQL and Redis versions.

    make bench                                   # all of them
    BENCH_ONLY=load,chaos make bench             # some of them
    BENCH_NOTE="shared with 7 other jobs" make bench
    .venv/bin/python bench/report.py --markdown  # the table again, from var/bench/report.json
    .venv/bin/python bench/report.py --soak      # only the soak section, from bench/soak.json
    .venv/bin/python bench/report.py --peers     # only the peers section, from var/bench/peers.json

Writes var/bench/report.json and bench/REPORT.md (committed; the README links it). Exits 1 if
any benchmark failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REPORT_JSON = ROOT / "var" / "bench" / "report.json"
REPORT_MD = ROOT / "bench" / "REPORT.md"
# `make soak` writes its figures here (committed): the report keeps a section for them, since a
# soak runs for an hour and is not part of `make bench`.
SOAK_JSON = ROOT / "bench" / "soak.json"
SOAK_HEADING = "## Soak (`make soak`)"
# `make bench-peers` (and `make bench`) keep the peers' figures here (committed), so that the
# report's peers section survives a `make bench` that skipped them (BENCH_ONLY).
PEERS_JSON = ROOT / "bench" / "peers.json"
PEERS_RUN_JSON = ROOT / "var" / "bench" / "peers.json"
PEERS_HEADING = "## Peers (`make bench-peers`)"
PEERS_ROWS = (  # (system, what it is)
    ("product", "the product: POST /api/runs, web + Celery worker"),
    ("product_in_process", "the product's governed run in one process (no HTTP, hop in place)"),
    ("langgraph_sync", "LangGraph + PostgresSaver, durability=sync"),
    ("dbos_transactions", "DBOS, two datasource transactions"),
    ("dbos_steps", "DBOS, two @DBOS.step"),
    ("openai_agents", "OpenAI Agents SDK, no persistence"),
    ("bare_psycopg", "bare psycopg SELECT + INSERT"),
    ("product_approval", "the product, HIGH call approved at once"),
    ("langgraph_interrupt", "LangGraph interrupt(), resumed at once"),
)
PEERS_COLUMNS = (
    ("p50 ms at 1", "p50_ms_at_1"),
    ("CPU ms/run at 1", "cpu_ms_per_run_at_1"),
    ("runs/s at 16", "runs_per_s_at_16"),
    ("p95 ms at 16", "p95_ms_at_16"),
    ("CPU ms/run at 16", "cpu_ms_per_run_at_16"),
    ("of it PostgreSQL", "postgres_cpu_ms_per_run_at_16"),
    ("statements/run", "statements_per_run_at_16|statements_per_run_at_1"),
)
SOAK_VIOLATIONS = (
    ("duplicates", "duplicates"),
    ("lost bookings", "lost_bookings"),
    ("runs left hanging", "hanging"),
    ("overlaps", "overlaps"),
    ("receipt errors", "receipts"),
    ("trace gaps", "trace_gaps"),
)


@dataclass(frozen=True)
class Bench:
    name: str
    script: str  # under bench/
    headline: tuple[tuple[str, str], ...] = ()  # (label, dotted path into its JSON)
    args: tuple[str, ...] = field(default=())
    timeout_s: int = 1800


BENCHMARKS = [
    Bench(
        "contention",
        "booking_contention.py",
        (
            ("service reservations/s", "service_reservations_per_s"),
            ("raw constrained INSERTs/s (baseline)", "raw_inserts_per_s"),
            ("service / raw", "ratio_service_vs_raw"),
            ("errors", "errors"),
            ("double bookings", "double_bookings"),
        ),
    ),
    Bench(
        "runtime",
        "runtime_overhead.py",
        (
            ("governed write / design floor", "in_process.governed_vs_floor"),
            ("governed read / the same tool's handler", "in_process_read.overhead_ratio"),
            ("governed read / room_search alone", "in_process_read.governed_vs_selector"),
            (
                "CPU ms per GET /api/runs/<id> / GET /api/tools",
                "end_to_end.api_reads.run.cpu_ms_per_request|end_to_end.api_reads.tools.cpu_ms_per_request",
            ),
            ("16 at once: p95 ms", "end_to_end.at_16.p95_ms"),
            ("run p50 ms, one at a time", "end_to_end.one_at_a_time.p50_ms"),
            ("run p50 / no-op chain p50", "end_to_end.run_p50_vs_noop_chain"),
            ("runs/s, 16 at once", "end_to_end.at_16.runs_per_s"),
            ("CPU ms per run, 16 at once", "end_to_end.at_16.cpu_ms_per_run"),
            ("runs not succeeded", "end_to_end.at_16.not_succeeded"),
        ),
    ),
    Bench(
        "load",
        "load.py",
        (
            ("employees", "employees"),
            ("seconds for all employees' operations", "seconds"),
            ("operations/s (requests/s, run polls included)", "operations_per_s|requests_per_s"),
            ("request p50 / p95 / p99 ms", "latency.p50_ms|latency.p95_ms|latency.p99_ms"),
            ("loaded p50 / one employee alone p50", "ratio_p50_loaded_vs_alone"),
            ("booking runs/s", "runs_per_s"),
            ("run p50 / p95 / p99 ms", "runs.p50_ms|runs.p95_ms|runs.p99_ms"),
            (
                "runs not succeeded (booking, approved, reconciled)",
                "runs.not_succeeded|approvals.not_succeeded|reconciled_runs.not_succeeded",
            ),
            ("errors", "errors"),
            ("invariant violations", "invariant_violations"),
        ),
    ),
    Bench("trace", "trace_latency.py"),
    Bench(
        "peers",
        "peers.py",
        (
            (
                "CPU ms per run at 16: product / LangGraph sync / DBOS transactions",
                "systems.product.cpu_ms_per_run_at_16|systems.langgraph_sync.cpu_ms_per_run_at_16"
                "|systems.dbos_transactions.cpu_ms_per_run_at_16",
            ),
            (
                "runs/s at 16: product / LangGraph sync / DBOS transactions",
                "systems.product.runs_per_s_at_16|systems.langgraph_sync.runs_per_s_at_16"
                "|systems.dbos_transactions.runs_per_s_at_16",
            ),
            (
                "p95 ms at 16: product / LangGraph sync / DBOS transactions",
                "systems.product.p95_ms_at_16|systems.langgraph_sync.p95_ms_at_16"
                "|systems.dbos_transactions.p95_ms_at_16",
            ),
            (
                "p50 ms one at a time: product / LangGraph sync",
                "systems.product.p50_ms_at_1|systems.langgraph_sync.p50_ms_at_1",
            ),
            (
                "approval p50 ms: product / LangGraph interrupt()",
                "systems.product_approval.p50_ms_at_1|systems.langgraph_interrupt.p50_ms_at_1",
            ),
            ("issue 25 targets met", "targets_met"),
            ("failed runs", "error_count"),
        ),
    ),
    Bench(
        "chaos",
        "chaos.py",
        (
            ("tests / trials", "tests|trials"),
            ("runs", "runs"),
            ("duplicates", "duplicates"),
            ("lost bookings", "lost_bookings"),
            ("runs left hanging", "hanging"),
            ("overlaps / receipts / trace gaps", "overlaps|receipts|trace_gaps"),
        ),
    ),
]


def dig(figures: Any, path: str) -> Any:
    values = []
    for part in path.split("|"):
        value = figures
        for key in part.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        values.append(value)
    return values[0] if len(values) == 1 else " / ".join(str(v) for v in values)


def headline(bench: Bench, figures: dict[str, Any]) -> list[tuple[str, Any]]:
    if bench.headline:
        return [(label, dig(figures, path)) for label, path in bench.headline]
    # No headline declared: the top-level numbers, as printed.
    return [
        (k, v) for k, v in figures.items() if isinstance(v, int | float) and not isinstance(v, bool)
    ][:10]


def last_json(text: str) -> dict[str, Any] | None:
    """The JSON object a benchmark printed last (pretty-printed or on one line)."""
    decoder = json.JSONDecoder()
    starts = [i for i, c in enumerate(text) if c == "{" and (i == 0 or text[i - 1] == "\n")]
    for start in reversed(starts):
        try:
            value, _ = decoder.raw_decode(text[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def run(bench: Bench) -> dict[str, Any]:
    script = ROOT / "bench" / bench.script
    if not script.exists():
        return {"status": "missing", "script": f"bench/{bench.script}"}
    py = sys.executable
    cmd = [py, "-m", "config.devservers", "exec", "--var", f"var/bench-{bench.name}", "--fresh",
           "--fast", "--", py, str(script), *bench.args]  # fmt: skip
    print(f"== {bench.name}: {' '.join(cmd[-2 - len(bench.args) :])}", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, timeout=bench.timeout_s, check=False
        )
        output, code = done.stdout, done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = exc.stdout or "", "timeout"
    figures = last_json(output if isinstance(output, str) else output.decode())
    return {
        "status": "ok" if code == 0 and figures is not None else "failed",
        "exit_code": code,
        "seconds": round(time.monotonic() - started, 1),
        "script": f"bench/{bench.script}",
        "figures": figures,
    }


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False).stdout
    except OSError:
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def machine() -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from config.devservers import _pg_bin, _redis_bin

    meminfo = Path("/proc/meminfo").read_text().split("\n")
    total_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal"))
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().split("\n")
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(total_kb / 1024 / 1024, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "postgres": "DATABASE_URL"
        if os.environ.get("DATABASE_URL")
        else _version([_pg_bin("postgres"), "--version"]),
        "redis": "REDIS_URL"
        if os.environ.get("REDIS_URL")
        else _version([_redis_bin(), "--version"]),
        "platform": platform.platform(),
    }


def _git(*args: str) -> str:
    git = shutil.which("git")
    if git is None:
        return ""
    return subprocess.run(
        [git, *args], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()


def commit() -> str:
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return _git("rev-parse", "--short", "HEAD") + ("+changes" if dirty else "")


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# Benchmark report",
        "",
        f"Written by `make bench` (`bench/report.py`) on {report['generated_at']} at commit "
        f"`{report['commit']}`. Every figure comes from one run; each ratio compares against a "
        "baseline measured in that same run. The whole report: `var/bench/report.json`; what "
        "each benchmark measures: [bench/README.md](README.md).",
        "",
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, Python {m['python']}, "
        f"{m['postgres']}, {m['redis']}; load average at the start "
        f"{report['load_average_before']}, at the end {m['load_average']}.",
        "",
    ]
    if report.get("note"):
        lines += [f"> {report['note']}", ""]
    lines += ["| benchmark | figure | value |", "|---|---|---|"]
    for name, result in report["benchmarks"].items():
        status = result["status"]
        if status != "ok" or not result.get("figures"):
            detail = f"exit {result.get('exit_code')}" if status == "failed" else result["script"]
            lines.append(f"| {name} | **{status}** | {detail} |")
        if not result.get("figures"):
            continue
        bench = next(b for b in BENCHMARKS if b.name == name)
        for i, (label, value) in enumerate(headline(bench, result["figures"])):
            first = f"{name} ({result['seconds']} s)" if i == 0 else ""
            lines.append(f"| {first} | {label} | {value} |")
    return "\n".join(lines) + "\n" + peers_markdown() + soak_markdown()


def _figure(figures: dict[str, Any], path: str) -> str:
    for key in path.split("|"):
        if figures.get(key) is not None:
            return str(figures[key])
    return "-"


def peers_markdown() -> str:
    """The peers' section: every system's medians and the issue's targets (empty when no
    peers run was recorded)."""
    if not PEERS_JSON.exists():
        return ""
    peers = json.loads(PEERS_JSON.read_text())
    settings, systems = peers["settings"], peers["systems"]
    lines = [
        "",
        PEERS_HEADING,
        "",
        f"Recorded {peers.get('recorded_at', '?')} at commit `{peers.get('commit', '?')}`: the "
        "same two-call booking on every system (bench/README.md), medians over "
        f"{settings['rounds']} interleaved rounds; per round {settings['runs_one_at_a_time_per_round']}"
        f" runs one at a time ({settings['approved_runs_per_round']} on the approval paths) and "
        f"{settings['batches_per_round']} batches of {settings['concurrent']} at once. CPU: every "
        "process of the system and PostgreSQL; statements: "
        f"{peers['method']['statements']}. Failed runs: {peers.get('error_count', '?')}.",
        "",
        "| system | " + " | ".join(label for label, _ in PEERS_COLUMNS) + " |",
        "|---|" + "---|" * len(PEERS_COLUMNS),
    ]
    for name, label in PEERS_ROWS:
        if name in systems:
            cells = [_figure(systems[name], path) for _, path in PEERS_COLUMNS]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "| issue 25 target | value | bound | met |", "|---|---|---|---|"]
    lines += _target_rows(peers.get("targets", []))
    if inner := peers.get("targets_in_process"):
        lines += [
            "",
            "The same two-call targets for the governed run without its transport (not the "
            'issue\'s verdict; bench/README.md, "eighth pass"):',
            "",
            "| target, in process | value | bound | met |",
            "|---|---|---|---|",
            *_target_rows(inner),
        ]
    return "\n".join(lines) + "\n"


def _target_rows(targets: list[dict[str, Any]]) -> list[str]:
    rows = []
    for t in targets:
        bound = f"<= {t['max']}" if "max" in t else f">= {t['min']}"
        rows.append(
            f"| {t['figure']}: {t['ratio']} | {t['value']} | {bound} | "
            f"{'yes' if t['met'] else '**no**'} |"
        )
    return rows


def peers_record(figures: dict[str, Any]) -> None:
    """Keep a peers run's figures (with the commit) as bench/peers.json."""
    PEERS_JSON.write_text(json.dumps(figures | {"commit": commit()}, indent=2) + "\n")


def peers_section_rewrite() -> None:
    """REPORT.md with its peers section replaced by var/bench/peers.json's (kept as
    bench/peers.json); the table above and the soak section below kept."""
    if PEERS_RUN_JSON.exists():
        peers_record(json.loads(PEERS_RUN_JSON.read_text()))
    text = REPORT_MD.read_text() if REPORT_MD.exists() else ""
    table = text.split("\n" + PEERS_HEADING, 1)[0].split("\n" + SOAK_HEADING, 1)[0]
    REPORT_MD.write_text(table.rstrip("\n") + "\n" + peers_markdown() + soak_markdown())


def soak_markdown() -> str:
    """The soak's section: its trials, runs and every invariant count, and per test its seed,
    trials and seconds (empty when no soak was recorded)."""
    if not SOAK_JSON.exists():
        return ""
    soak = json.loads(SOAK_JSON.read_text())
    lines = [
        "",
        SOAK_HEADING,
        "",
        f"Recorded {soak.get('recorded_at', '?')} at commit `{soak.get('commit', '?')}`: "
        f"{soak['trials']} seeded trials over {soak['tests']} chaos tests "
        f"({soak['trials_per_test']} each), {soak['load_processes']} more processes keeping the "
        f"CPU busy, {soak['seconds']} s; pytest exit code {soak['pytest_exit_code']}.",
        "",
        "| invariant | count |",
        "|---|---|",
        f"| trials / runs | {soak['trials']} / {soak['runs']} |",
        *(f"| {label} | {soak.get(key, 0)} |" for label, key in SOAK_VIOLATIONS),
        "",
        "| test | seed | trials | runs | seconds |",
        "|---|---|---|---|---|",
    ]
    for name, figures in sorted(soak.get("per_test", {}).items()):
        lines.append(
            f"| {name} | {figures.get('seed')} | {figures.get('trials', 0)} | "
            f"{figures.get('runs', 0)} | {figures.get('seconds', '')} |"
        )
    return "\n".join(lines) + "\n"


def soak_section_rewrite() -> None:
    """REPORT.md with its soak section replaced by bench/soak.json's (the table above kept)."""
    text = REPORT_MD.read_text() if REPORT_MD.exists() else ""
    table = text.split("\n" + SOAK_HEADING, 1)[0].rstrip("\n") + "\n"
    REPORT_MD.write_text(table + soak_markdown())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="rewrite REPORT.md only")
    parser.add_argument("--soak", action="store_true", help="rewrite REPORT.md's soak section")
    parser.add_argument("--peers", action="store_true", help="rewrite REPORT.md's peers section")
    args = parser.parse_args(argv)
    if args.soak:
        soak_section_rewrite()
        return 0
    if args.peers:
        peers_section_rewrite()
        return 0
    if args.markdown:
        REPORT_MD.write_text(markdown(json.loads(REPORT_JSON.read_text())))
        return 0
    only = {n.strip() for n in os.environ.get("BENCH_ONLY", "").split(",") if n.strip()}
    unknown = only - {b.name for b in BENCHMARKS}
    if unknown:
        print(f"unknown benchmarks: {sorted(unknown)}", file=sys.stderr)
        return 2
    load_before = [round(x, 2) for x in os.getloadavg()]
    started = datetime.now(UTC)
    results = {b.name: run(b) for b in BENCHMARKS if not only or b.name in only}
    if results.get("peers", {}).get("figures"):
        peers_record(results["peers"]["figures"])
    report = {
        "generated_at": started.strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "note": os.environ.get("BENCH_NOTE", ""),
        "load_average_before": load_before,
        "machine": machine(),
        "benchmarks": results,
    }
    REPORT_JSON.parent.mkdir(parents=True, exist_ok=True)
    REPORT_JSON.write_text(json.dumps(report, indent=2))
    REPORT_MD.write_text(markdown(report))
    print(json.dumps({n: r["status"] for n, r in results.items()}), flush=True)
    return 1 if any(r["status"] == "failed" for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
