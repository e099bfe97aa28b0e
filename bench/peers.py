"""The product against its peers: the same two-call booking on other agent runtimes.

Every system makes the same run: search rooms with the product's own search statement
(`bookings.selectors`' "search"), then book the first room with an INSERT under the same
exclusion constraint and a unique idempotency key. The peers, each in a process of its own
(bench/peer_systems.py) and in a database of its own on the product's PostgreSQL server (same
tables, same constraint):

- `langgraph_sync`: LangGraph, a scripted model node and a ToolNode, checkpointed by
  `PostgresSaver` with `durability="sync"`;
- `langgraph_interrupt`: the same graph, the booking tool asking for approval with
  `interrupt()`, resumed at once with `Command(resume=...)`;
- `dbos_steps`: a DBOS workflow of two `@DBOS.step`s (psycopg);
- `dbos_transactions`: a DBOS workflow of two datasource transactions
  (`SQLAlchemyDatasource.transaction`, the current API of what was `@DBOS.transaction`);
- `openai_agents`: the OpenAI Agents SDK, a scripted `Model` returning the two tool calls, no
  network, no persistence;
- `bare_psycopg`: the SELECT and the INSERT on a psycopg pool;

and the product end to end, as bench/cpu_probe.py drives it (`product`: POST /api/runs of a
two-call booking through uvicorn and the Celery worker; `product_approval`: a booking of R16,
premium, so HIGH: the approver A01 approves it in the web as soon as it is pending).

Rounds interleave the systems (each round runs every system, in a rotated order): per round
and system, runs one at a time (p50, CPU and statements per run) and batches of 16 at once
(runs/s, p95, CPU and statements per run). CPU is read from /proc (utime + stime): the peer's
process, or the product's web, worker and Redis; plus the PostgreSQL backends of the system's
own database and PostgreSQL's own processes (postmaster, WAL writer, checkpointer, autovacuum).
Statements per run come from pg_stat_statements (enabled on the embedded server by this script:
`shared_preload_libraries`, then a restart), per database, the harness's own role left out.

    make bench-peers        # installs the bench-peers extra, then runs on fresh servers
    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/peers.py [--rounds 6] [--seq 20]
        [--batches 3] [--concurrent 16] [--only langgraph_sync,product]

Prints one JSON object (also written to var/bench/peers.json): medians over the rounds, each
round's figure, and the ratios product / peer of every figure. Exits 1 if a run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The peers' side (no Django), importable once ROOT is on the path.
from bench.peer_systems import PEER_SCHEMA, PEERS, ROOM_COLUMNS, Slots, pct  # noqa: E402

# Set in main(), not at import: tests/test_bench_peers.py imports this module.
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "AGENT_RATE_LIMIT_PER_MINUTE": "1000000",  # measure the path, not the limiter
    "AGENT_RUN_RATE_LIMIT_PER_MINUTE": "1000000",
    "DEBUG": "false",  # production settings: no per-query logging
}

PRODUCTS = ("product", "product_approval")
# The product's governed run in a process of its own, as the peers run (bench/product_in_process.py):
# no HTTP request, its Celery hop executed in place. Driven like a peer, in the product's database.
IN_PROCESS = "product_in_process"
SYSTEMS = (*PRODUCTS, IN_PROCESS, *PEERS)
# The targets (issue 25): product / peer; later work, reported here, not met here.
TARGETS = (
    ("cpu_ms_per_run_at_16", "product", "langgraph_sync", "max", 1.0),
    ("cpu_ms_per_run_at_16", "product", "dbos_transactions", "max", 1.0),
    ("runs_per_s_at_16", "product", "langgraph_sync", "min", 1.0),
    ("runs_per_s_at_16", "product", "dbos_transactions", "min", 1.0),
    ("p95_ms_at_16", "product", "langgraph_sync", "max", 1.0),
    ("p95_ms_at_16", "product", "dbos_transactions", "max", 1.0),
    ("p50_ms_at_1", "product", "langgraph_sync", "max", 1.0),
    ("p50_ms_at_1", "product_approval", "langgraph_interrupt", "max", 1.0),
    ("cpu_ms_per_run_at_1", "product_approval", "langgraph_interrupt", "max", 1.0),
)
OBSERVER = "peers_observer"  # the harness's own role: its statements and backend are left out

# === the harness ==============================================================================


def product_search_sql() -> str:
    """The product's own search statement, as `bookings.selectors.room_search` sends it."""
    from bookings import selectors

    return selectors._sql("search")


class Child:
    """A peer's process, driven over its stdin/stdout."""

    def __init__(self, name: str, config: dict[str, Any], log: Any) -> None:
        self.name = name
        script = ["product_in_process.py"] if name == IN_PROCESS else ["peer_systems.py", name]
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / script[0]), *script[1:]],
            cwd=ROOT,
            env=os.environ | {"PEERS_CHILD": json.dumps(config)} | config.get("env", {}),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            bufsize=1,
        )
        ready = self.read(timeout_s=180)
        self.pid = ready["pid"]

    def read(self, timeout_s: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        if self.proc.stdout is None:
            raise RuntimeError("no pipe")
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"peer {self.name} exited (code {self.proc.poll()})")
            if line.startswith("@@ "):
                return json.loads(line[3:])
        raise RuntimeError(f"peer {self.name} did not answer within {timeout_s}s")

    def ask(self, op: str, n: int = 0) -> dict[str, Any]:
        if self.proc.stdin is None:
            raise RuntimeError("no pipe")
        self.proc.stdin.write(json.dumps({"op": op, "n": n}) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.ask("quit")
                self.read(timeout_s=30)
            except (RuntimeError, OSError, ValueError):
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _proc_table() -> dict[int, tuple[int, float, float]]:
    from bench.cpu_probe import _proc_table as table

    return table()


def _on_cpu_ms(pid: int) -> float:
    """Time a single-threaded process has spent on the CPU (/proc/PID/schedstat, in ns)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e6
    except OSError:  # exited meanwhile
        return 0.0


class Meter:
    """CPU ms and statements of one system, read from /proc and PostgreSQL's statistics over
    the harness's own connection (role OBSERVER, left out of both)."""

    def __init__(
        self, observer: Any, postmaster: int, exclude: set[int], *, statements: bool
    ) -> None:
        self.observer = observer
        self.postmaster = postmaster
        self.exclude = exclude
        self.statements = statements  # pg_stat_statements is there to read

    def snapshot(self, roots: list[int], database: str) -> dict[str, Any]:
        activity = self.observer.execute(
            "SELECT pid, datname, backend_type FROM pg_stat_activity"
        ).fetchall()
        statements = None
        if self.statements:
            statements = self._statements(database)
        table = _proc_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        client = {pid: db for pid, db, kind in activity if kind == "client backend"}
        cpu: dict[int, float] = {}
        # PostgreSQL: the postmaster (with the backends it reaped), its own processes, and the
        # client backends of this system's database; each a single thread, so its schedstat
        # (nanoseconds on the CPU) is exact where /proc's ticks are 10 ms.
        if self.postmaster in table:
            cpu[self.postmaster] = _on_cpu_ms(self.postmaster) + table[self.postmaster][2]
        for pid in children.get(self.postmaster, ()):
            if pid in self.exclude or (pid in client and client[pid] != database):
                continue
            cpu[pid] = _on_cpu_ms(pid) + table[pid][2]
        own: dict[int, float] = {}
        todo = list(roots)
        while todo:
            pid = todo.pop()
            if pid in table:
                own[pid] = table[pid][1] + table[pid][2]
            todo.extend(children.get(pid, ()))
        return {"postgres": cpu, "own": own, "statements": statements}

    def _statements(self, database: str) -> int:
        return self.observer.execute(
            "SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s"
            " JOIN pg_database d ON d.oid = s.dbid JOIN pg_roles r ON r.oid = s.userid"
            " WHERE d.datname = %s AND r.rolname <> %s"
            # the foreign keys' checks, which PostgreSQL runs (and pg_stat_statements counts)
            # as statements of their own: no client sends them
            " AND s.query NOT LIKE '%%FOR KEY SHARE OF x'",
            [database, OBSERVER],
        ).fetchone()[0]

    @staticmethod
    def delta(before: dict[str, Any], after: dict[str, Any]) -> tuple[float, float, int | None]:
        """(CPU ms of the system's own processes, of PostgreSQL, statements) between two
        snapshots; a process that started meanwhile counts whole."""
        own, postgres = (
            sum(ms - before[part].get(pid, 0.0) for pid, ms in after[part].items())
            for part in ("own", "postgres")
        )
        if after["statements"] is None:
            return own, postgres, None
        return own, postgres, int(after["statements"] - before["statements"])

    def wait_quiet(self, roots: list[int], database: str, timeout: float = 10) -> None:
        """Until the system's processes use under 5 ms of CPU in 0.3 s (the work a phase left
        behind, such as autovacuum or a checkpoint, is not counted against the next)."""
        deadline = time.monotonic() + timeout
        before = self.snapshot(roots, database)
        while time.monotonic() < deadline:
            time.sleep(0.3)
            after = self.snapshot(roots, database)
            own, postgres, _ = self.delta(before, after)
            if own + postgres < 5:
                return
            before = after


def phase_figures(
    latencies: list[float], own: float, postgres: float, statements: int | None
) -> dict[str, Any]:
    n = len(latencies)
    return {
        "runs": n,
        "p50_ms": round(pct(latencies, 50), 2),
        "p95_ms": round(pct(latencies, 95), 2),
        "cpu_ms_per_run": round((own + postgres) / n, 2),
        "own_cpu_ms_per_run": round(own / n, 2),
        "postgres_cpu_ms_per_run": round(postgres / n, 2),
        "statements_per_run": None if statements is None else round(statements / n, 2),
    }


class ProductDriver:
    """The product end to end (bench/cpu_probe.py's stack and API): two-call booking runs, and
    runs booking R16 (HIGH) that A01 approves in the web as soon as the request is pending."""

    def __init__(self, stack: Any, observer: Any, tz: str) -> None:
        import httpx2

        from bench import cpu_probe as probe

        self.stack = stack
        self.api = probe.Api(stack.port)
        self.requests = probe.Requests(tz, days_ahead=20)
        self.approval_slots = Slots(tz, days_ahead=60)  # within the 90-day horizon
        self.observer = observer
        self.web = httpx2.Client(base_url=f"http://127.0.0.1:{stack.port}", timeout=30)
        page = self.web.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        if token is None:
            raise RuntimeError("no CSRF token on the sign-in page")
        answer = self.web.post(
            "/login/",
            data={"username": "a01", "password": "a01-demo-pass", "csrfmiddlewaretoken": token[1]},
        )
        if answer.status_code != 302:
            raise RuntimeError(f"the approver could not sign in: {answer.status_code}")
        self._lock = threading.Lock()

    def roots(self) -> list[int]:
        roots = self.stack.roots()
        return [pid for name, pid in roots.items() if name != "postgres"]

    def _post(self, user: str, text: str) -> tuple[str, float]:
        t0 = time.time()
        status, body = self.api.call("POST", "/api/runs", user, {"request": text})
        if status != 202:
            raise RuntimeError(f"POST /api/runs answered {status}: {body}")
        return body["run_id"], t0

    def _wait(self, ids: dict[str, float], timeout: float = 120) -> tuple[list[float], list[str]]:
        """Until every run ended (polled by the observer); latency: POST sent -> finished_at."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                rows = self.observer.execute(
                    "SELECT id::text, status, extract(epoch FROM finished_at)"
                    " FROM agentops_agentrun WHERE id = ANY(%s::uuid[])"
                    " AND finished_at IS NOT NULL",
                    [list(ids)],
                ).fetchall()
            if len(rows) == len(ids):
                latencies = [(float(end) - ids[rid]) * 1000 for rid, _, end in rows]
                return latencies, [f"run {rid}: {s}" for rid, s, _ in rows if s != "succeeded"]
            time.sleep(0.005)
        raise RuntimeError(f"{len(ids)} runs did not all finish within {timeout}s")

    def one(self) -> tuple[list[float], list[str]]:
        user, text = self.requests.next()
        run_id, t0 = self._post(user, text)
        return self._wait({run_id: t0})

    def batch(self, count: int) -> tuple[list[float], list[str]]:
        ids: dict[str, float] = {}
        barrier = threading.Barrier(count)
        errors: list[str] = []

        def post() -> None:
            user, text = self.requests.next()
            barrier.wait()
            try:
                run_id, t0 = self._post(user, text)
            except Exception as exc:
                errors.append(str(exc)[:300])
                return
            with self._lock:
                ids[run_id] = t0

        threads = [threading.Thread(target=post) for _ in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        latencies, failed = self._wait(ids)
        return latencies, errors + failed

    def approved(self) -> tuple[list[float], list[str]]:
        """One run that books R16 for E17: pending -> A01 approves in the web -> finished."""
        start, end = self.approval_slots.next()
        text = f"book R16 on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} for 3 people"
        run_id, t0 = self._post("e17", text)
        deadline = time.monotonic() + 60
        while True:
            with self._lock:
                row = self.observer.execute(
                    "SELECT id::text FROM approvals_approvalrequest"
                    " WHERE run_ref = %s AND status = 'pending'",
                    [run_id],
                ).fetchone()
                ended = self.observer.execute(
                    "SELECT status FROM agentops_agentrun WHERE id = %s AND finished_at IS NOT NULL",
                    [run_id],
                ).fetchone()
            if row is not None:
                break
            if ended is not None:
                return [], [f"run {run_id} ended {ended[0]} without asking for approval"]
            if time.monotonic() > deadline:
                return [], [f"run {run_id} never asked for approval"]
            time.sleep(0.005)
        answer = self.web.post(
            f"/approvals/{row[0]}/decide/",
            data={
                "decision": "approve",
                "reason": "benchmark",
                "csrfmiddlewaretoken": self.web.cookies.get("csrftoken"),
            },
        )
        if answer.status_code != 302:
            return [], [f"approve: HTTP {answer.status_code}"]
        return self._wait({run_id: t0})


def enable_pg_stat_statements(dsn: str) -> str:
    """pg_stat_statements on the server: on the embedded one (AGENTOPS_VAR), preloaded and the
    server restarted if it is not yet; returns how statements are counted."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        preload = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
    pgdata = Path(os.environ.get("AGENTOPS_VAR", "/nonexistent")) / "pgdata"
    if "pg_stat_statements" not in preload:
        if not (pgdata / "PG_VERSION").exists():
            return "unavailable: pg_stat_statements is not preloaded on this server"
        from config.devservers import _pg_bin, _pg_run_as

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        # -l: the server must not inherit this process's output (pg_ctl would never return).
        log = str(pgdata / "server.log")
        restart = ["-D", str(pgdata), "-l", log, "-w", "-t", "60", "-m", "fast", "restart"]
        subprocess.run(
            [_pg_bin("pg_ctl"), *restart],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **_pg_run_as(),
        )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("SELECT pg_stat_statements_reset()")
    return "pg_stat_statements (top-level statements, BEGIN/COMMIT included), per database"


def peer_database_create(observer: Any, dsn: str, name: str) -> None:
    """A database of the peer's own (``name`` at ``dsn``'s server), with the peer schema and
    the product's rooms and groups, read over ``observer`` (a session in the product's)."""
    import psycopg

    observer.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    observer.execute(f'CREATE DATABASE "{name}"')
    rooms = observer.execute(f"SELECT {ROOM_COLUMNS} FROM bookings_room").fetchall()
    groups = observer.execute("SELECT id, name FROM auth_group").fetchall()
    memberships = observer.execute("SELECT user_id, group_id FROM accounts_user_groups").fetchall()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in PEER_SCHEMA:
            conn.execute(statement)
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO bookings_room ({ROOM_COLUMNS}) VALUES ({', '.join(['%s'] * 13)})",
                rooms,
            )
            cur.executemany("INSERT INTO auth_group (id, name) VALUES (%s, %s)", groups)
            cur.executemany(
                "INSERT INTO accounts_user_groups (user_id, group_id) VALUES (%s, %s)",
                memberships,
            )
        conn.execute("ANALYZE")


def median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def summarize(per_round: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians over the rounds of each system's figures, and each round's."""
    out: dict[str, Any] = {}
    for system, rounds in per_round.items():
        figures: dict[str, Any] = {}
        for key in rounds[0]:
            values = [r[key] for r in rounds if r.get(key) is not None]
            if values and all(isinstance(v, int | float) for v in values):
                figures[key] = median(values)
                figures[f"{key}_by_round"] = values
        out[system] = figures
    return out


HEADLINE = (
    "p50_ms_at_1",
    "cpu_ms_per_run_at_1",
    "statements_per_run_at_1",
    "runs_per_s_at_16",
    "p95_ms_at_16",
    "cpu_ms_per_run_at_16",
    "statements_per_run_at_16",
)


def started(
    name: str, config: dict[str, Any], log: Any, concurrent: int, errors: list[str]
) -> Child:
    """A system's process, started and warmed (10 runs one at a time, one batch at once);
    the warm-up's failures go to ``errors``."""
    print(f"== starting {name}", file=sys.stderr, flush=True)
    child = Child(name, config, log)
    warm = child.ask("seq", 10)
    warm_batch = child.ask("batch", concurrent)
    errors += [f"{name}: {e}" for e in warm["errors"] + warm_batch["errors"]]
    return child


def ratios(summary: dict[str, Any]) -> dict[str, Any]:
    """product / peer for every headline figure (product_approval / langgraph_interrupt too),
    the same for the governed run in process, and product / product_in_process: what the
    transport (the web's request and the worker's hop) adds."""
    out: dict[str, Any] = {}
    pairs = [(p, peer) for p in ("product", IN_PROCESS) for peer in PEERS]
    pairs = [(p, peer) for p, peer in pairs if peer != "langgraph_interrupt"]
    pairs += [("product_approval", "langgraph_interrupt"), ("product", IN_PROCESS)]
    for product, peer in pairs:
        if product not in summary or peer not in summary:
            continue
        row = {}
        for key in HEADLINE:
            a, b = summary[product].get(key), summary[peer].get(key)
            if a is not None and b:
                row[key] = round(a / b, 2)
        out[f"{product}/{peer}"] = row
    return out


def verdicts(summary: dict[str, Any], product_as: str = "product") -> list[dict[str, Any]]:
    """Issue 25's targets; with ``product_as``, its two-call targets for that system instead
    of the end-to-end product (the approval path's are left out)."""
    out = []
    for key, system, peer, kind, bound in TARGETS:
        if product_as != "product" and system != "product":
            continue
        product = product_as if system == "product" else system
        a = summary.get(product, {}).get(key)
        b = summary.get(peer, {}).get(key)
        if a is None or not b:
            continue
        value = round(a / b, 2)
        met = value <= bound if kind == "max" else value >= bound
        out.append(
            {"figure": key, "ratio": f"{product}/{peer}", "value": value, kind: bound, "met": met}
        )
    return out


class Rounds:
    """One system's figures for one round: runs one at a time, then batches at once."""

    def __init__(
        self,
        args: argparse.Namespace,
        meter: Meter,
        product: ProductDriver | None,
        children: dict[str, Child],
        database: dict[str, str],
    ) -> None:
        self.args, self.meter, self.product = args, meter, product
        self.children, self.database = children, database
        self.errors: list[str] = []

    def _one_at_a_time(self, name: str) -> tuple[list[float], float]:
        """Latencies, and the CPU a peer's process reported (the product's is read from /proc)."""
        if self.product is not None and name in PRODUCTS:
            latencies: list[float] = []
            run = self.product.one if name == "product" else self.product.approved
            count = self.args.seq if name == "product" else self.args.approvals
            for _ in range(count):
                got, failed = run()
                latencies += got
                self.errors += failed
            return latencies, 0.0
        n = self.args.approvals if name == "langgraph_interrupt" else self.args.seq
        answer = self.children[name].ask("seq", n)
        self.errors += [f"{name}: {e}" for e in answer["errors"]]
        return answer["latencies"], answer["cpu_ms"]

    def _batches(self, name: str) -> tuple[list[float], float, list[float]]:
        """Latencies, a peer's own CPU, and runs/s of each batch."""
        latencies, rates, cpu = [], [], 0.0
        for _ in range(self.args.batches):
            t0 = time.monotonic()
            if self.product is not None and name == "product":
                got, failed = self.product.batch(self.args.concurrent)
            else:
                answer = self.children[name].ask("batch", self.args.concurrent)
                got, failed = answer["latencies"], [f"{name}: {e}" for e in answer["errors"]]
                cpu += answer["cpu_ms"]
            rates.append(self.args.concurrent / (time.monotonic() - t0))
            latencies += got
            self.errors += failed
        return latencies, cpu, rates

    def measure(self, name: str) -> dict[str, Any]:
        # The product's processes are read from /proc; a peer's process reports its own CPU.
        roots = self.product.roots() if self.product is not None and name in PRODUCTS else []
        db = self.database[name]
        figures: dict[str, Any] = {}
        self.meter.wait_quiet(roots, db)
        before = self.meter.snapshot(roots, db)
        latencies, child_cpu = self._one_at_a_time(name)
        own, postgres, statements = self.meter.delta(before, self.meter.snapshot(roots, db))
        if latencies:
            one = phase_figures(latencies, own + child_cpu, postgres, statements)
            figures |= {
                "p50_ms_at_1": one["p50_ms"],
                "cpu_ms_per_run_at_1": one["cpu_ms_per_run"],
                "own_cpu_ms_per_run_at_1": one["own_cpu_ms_per_run"],
                "postgres_cpu_ms_per_run_at_1": one["postgres_cpu_ms_per_run"],
                "statements_per_run_at_1": one["statements_per_run"],
            }
        if name == "product_approval":  # one approver, one request at a time
            return figures
        self.meter.wait_quiet(roots, db)
        before = self.meter.snapshot(roots, db)
        latencies, child_cpu, rates = self._batches(name)
        own, postgres, statements = self.meter.delta(before, self.meter.snapshot(roots, db))
        if latencies:
            many = phase_figures(latencies, own + child_cpu, postgres, statements)
            figures |= {
                "runs_per_s_at_16": round(statistics.median(rates), 2),
                "p50_ms_at_16": many["p50_ms"],
                "p95_ms_at_16": many["p95_ms"],
                "cpu_ms_per_run_at_16": many["cpu_ms_per_run"],
                "own_cpu_ms_per_run_at_16": many["own_cpu_ms_per_run"],
                "postgres_cpu_ms_per_run_at_16": many["postgres_cpu_ms_per_run"],
                "statements_per_run_at_16": many["statements_per_run"],
            }
        return figures


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seq", type=int, default=20, help="runs one at a time per round")
    parser.add_argument("--batches", type=int, default=3, help="batches of --concurrent per round")
    parser.add_argument("--concurrent", type=int, default=16)
    parser.add_argument("--approvals", type=int, default=10, help="approved runs per round")
    parser.add_argument("--worker-concurrency", type=int, default=4)
    parser.add_argument(
        "--worker-pool", default="prefork", help="Celery's --pool (prefork, threads)"
    )
    parser.add_argument("--only", default="", help="comma-separated systems")
    parser.add_argument("--out", default=str(ROOT / "var" / "bench" / "peers.json"))
    args = parser.parse_args()
    for key, value in BENCH_ENV.items():
        os.environ.setdefault(key, value)

    only = [s.strip() for s in args.only.split(",") if s.strip()]
    systems = [s for s in SYSTEMS if not only or s in only]
    counting = enable_pg_stat_statements(os.environ["DATABASE_URL"])

    import django

    django.setup()
    import psycopg
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from agentops.runtime.redis_client import get_redis
    from bench import cpu_probe as probe
    from bookings.demo import load_demo_data

    call_command("migrate", verbosity=0)
    load_demo_data()
    get_redis().flushdb()
    with open("/proc/loadavg") as f:
        load_before = f.read().split()[:3]
    product_dsn = probe.database_url()
    with connection.cursor() as cursor:
        cursor.execute("SELECT FROM pg_roles WHERE rolname = %s", [OBSERVER])
        if cursor.fetchone() is None:
            cursor.execute(f"CREATE ROLE {OBSERVER} LOGIN SUPERUSER")
        cursor.execute("SELECT pg_backend_pid()")
        (harness_backend,) = cursor.fetchone()
    observer = psycopg.connect(
        psycopg.conninfo.make_conninfo(product_dsn, user=OBSERVER), autocommit=True
    )
    search_sql = product_search_sql()
    user = get_user_model().objects.get(username="e17").pk
    database = dict.fromkeys((*PRODUCTS, IN_PROCESS), connection.settings_dict["NAME"])
    log_path = Path(os.environ.get("AGENTOPS_VAR", ROOT / "var")) / "peers-children.log"
    log = log_path.open("w")  # the peers' own output
    children: dict[str, Child] = {}
    stack = None
    errors: list[str] = []
    per_round: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    try:
        for i, name in enumerate(s for s in systems if s in PEERS):
            database[name] = f"peer_{name}"
            dsn = urlsplit(product_dsn)._replace(path=f"/{database[name]}").geturl()
            peer_database_create(observer, dsn, database[name])
            config = {
                "dsn": dsn,
                "search_sql": search_sql,
                "user": user,
                "tz": settings.TIME_ZONE,
                "days_ahead": 20 + 60 * i,
                "concurrent": args.concurrent,
            }
            children[name] = started(name, config, log, args.concurrent, errors)
        if IN_PROCESS in systems:
            # Its own days (the end-to-end product books from 20 days ahead, the approvals
            # from 60; 6 rounds take about 18 days of half-hour slots each).
            config = {
                "tz": settings.TIME_ZONE,
                "days_ahead": 41,
                "concurrent": args.concurrent,
                # Its sessions: a run's thread each, and the tool pool's 8 (as a peer's pool
                # holds 16); the server's 300 are shared by every system.
                "env": {"DB_POOL_MAX_SIZE": str(args.concurrent + 8)},
            }
            children[IN_PROCESS] = started(IN_PROCESS, config, log, args.concurrent, errors)
        connection.close()  # the harness's Django session idles from here on
        if any(s in PRODUCTS for s in systems):
            stack = probe.Stack(
                worker_concurrency=args.worker_concurrency, worker_pool=args.worker_pool
            ).start()
            stack.wait_for_worker()
            product = ProductDriver(stack, observer, settings.TIME_ZONE)
            for _ in range(2 * args.worker_concurrency):  # warm every worker child and the web
                product.one()
            for _ in range(3):
                product.batch(args.concurrent)
            if "product_approval" in systems:
                for _ in range(3):
                    product.approved()
            harness_backends = {harness_backend, stack.bench_backend}
        else:
            product, harness_backends = None, {harness_backend}
        observer_pid = observer.execute("SELECT pg_backend_pid()").fetchone()[0]
        postmaster = int(
            Path(f"/proc/{observer_pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        )
        meter = Meter(
            observer,
            postmaster,
            harness_backends | {observer_pid},
            statements=not counting.startswith("unavailable"),
        )

        rounds = Rounds(args, meter, product, children, database)
        for r in range(args.rounds):
            order = systems[r % len(systems) :] + systems[: r % len(systems)]
            print(
                f"== round {r + 1}/{args.rounds}: {', '.join(order)}", file=sys.stderr, flush=True
            )
            for name in order:
                per_round[name].append(rounds.measure(name))
        errors += rounds.errors
    finally:
        for child in children.values():
            child.stop()
        if stack is not None:
            stack.stop()
        log.close()
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[:3]
    summary = summarize(per_round)
    result = {
        "benchmark": "peers",
        "recorded_at": datetime.now(ZoneInfo("UTC")).strftime("%Y-%m-%d %H:%M UTC"),
        "settings": {
            "rounds": args.rounds,
            "runs_one_at_a_time_per_round": args.seq,
            "approved_runs_per_round": args.approvals,
            "batches_per_round": args.batches,
            "concurrent": args.concurrent,
            "product_worker": f"celery {args.worker_pool} x{args.worker_concurrency}",
        },
        "method": {
            "latency": "peers: around one run in the peer's process; product: POST /api/runs"
            " sent -> the run's finished_at",
            "cpu": "utime+stime from /proc: the peer's process, or the product's web, worker"
            " (with its pool children) and Redis; plus the PostgreSQL backends of the system's"
            " own database and PostgreSQL's own processes (postmaster with reaped children,"
            " WAL writer, checkpointer, autovacuum)",
            "statements": counting,
            "figures": "medians over the rounds",
        },
        "systems": summary,
        "ratios_product_over_peer": ratios(summary),
        "targets": (targets := verdicts(summary)),
        "targets_met": f"{sum(t['met'] for t in targets)} of {len(targets)}",
        # The same two-call targets for the governed run without its transport (not the
        # issue's verdict, which is the end-to-end product's above).
        "targets_in_process": (inner := verdicts(summary, product_as=IN_PROCESS)),
        "targets_in_process_met": f"{sum(t['met'] for t in inner)} of {len(inner)}",
        "errors": errors[:50],
        "error_count": len(errors),
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before_after": [load_before, load_after],
            "python": platform.python_version(),
            "postgres": observer.info.server_version,
            "packages": package_versions(),
        },
    }
    observer.close()
    text = json.dumps(result, indent=2)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    print(text)
    return 1 if errors else 0


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in (
        "langgraph",
        "langgraph-checkpoint-postgres",
        "dbos",
        "openai-agents",
        "psycopg",
        "django",
        "celery",
    ):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


if __name__ == "__main__":
    sys.exit(main())
