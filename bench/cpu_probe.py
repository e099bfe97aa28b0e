"""CPU cost of the product, measured from outside.

Starts the real stack against DATABASE_URL/REDIS_URL (the web server under uvicorn and a Celery
worker, as `make run` does; PostgreSQL and Redis are whatever those URLs point at, the embedded
servers under `make`), then reads the CPU time of every process of the product from /proc
(utime + stime of the web server, the worker and its pool children, the PostgreSQL postmaster and
all its backends and helpers, the Redis server; children reaped during the measurement are
counted through their parent's cutime + cstime). The benchmark's own process and its own
PostgreSQL backend are left out.

    make bench-cpu
    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/cpu_probe.py [--reads 300] [--rounds 4]

Used by bench/runtime_overhead.py for its end-to-end part; run alone it prints one JSON object:
PostgreSQL sessions opened by 50 GET /api/tools and by one two-call run, CPU ms per API read and
per two-call run, runs per second and p50/p95 of 16 runs started at once.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("AGENT_RATE_LIMIT_PER_MINUTE", "1000000")  # measure the path, not the limiter
os.environ.setdefault("AGENT_RUN_RATE_LIMIT_PER_MINUTE", "1000000")

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
BOOKING_USERS = ("e17", "a01", "admin")  # Engineering: a projector room there needs no approval


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# --- CPU time from /proc ----------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, float, float]]:
    """pid -> (ppid, own CPU ms, reaped children's CPU ms)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # exited meanwhile
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        ppid = int(fields[1])
        own = (int(fields[11]) + int(fields[12])) * TICK_MS
        reaped = (int(fields[13]) + int(fields[14])) * TICK_MS
        table[int(entry)] = (ppid, own, reaped)
    return table


def cpu_snapshot(roots: dict[str, int], exclude: Iterable[int] = ()) -> dict[str, float]:
    """CPU ms so far per named process tree (root, every live descendant, reaped children)."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    skip = set(exclude)
    totals = {}
    for name, root in roots.items():
        total, todo = 0.0, [root]
        while todo:
            pid = todo.pop()
            if pid in table and pid not in skip:
                total += table[pid][1] + table[pid][2]
            todo.extend(children.get(pid, ()))
        totals[name] = total
    return totals


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    delta = {name: round(after[name] - before[name], 1) for name in before}
    delta["total"] = round(sum(delta.values()), 1)
    return delta


# --- the stack --------------------------------------------------------------------------------


def database_url() -> str:
    from django.db import connection

    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgresql://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def _free_port() -> int:
    from config.devservers import free_port

    return free_port()


@dataclass
class Stack:
    """uvicorn + a Celery worker on this checkout, and the pids of every process of the product."""

    worker_concurrency: int = 4
    worker_pool: str = "prefork"
    extra_env: dict[str, str] = field(default_factory=dict)
    beat: bool = False  # the sweeper too (bench/load.py)
    port: int = 0
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    log: Any = None

    def start(self) -> Stack:
        from django.conf import settings
        from django.db import connection

        from config.devservers import port_open
        from config.run import web_argv

        self.port = self.port or _free_port()
        env = (
            os.environ
            | {"DATABASE_URL": database_url(), "REDIS_URL": settings.REDIS_URL}
            | self.extra_env
        )
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            "w", prefix="bench-stack-", suffix=".log", delete=False
        )
        common = {
            "cwd": ROOT,
            "env": env,
            "stdout": self.log,
            "stderr": subprocess.STDOUT,
            "start_new_session": True,
        }
        self.procs["worker"] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--loglevel=WARNING",
                f"--pool={self.worker_pool}",
                f"--concurrency={self.worker_concurrency}",
                "-Q",
                settings.CELERY_TASK_DEFAULT_QUEUE,
                "-I",
                "bench.noop_tasks",
                *(["--beat", "--schedule", f"{self.log.name}.beat"] if self.beat else []),
            ],
            **common,
        )
        self.procs["web"] = subprocess.Popen(web_argv("127.0.0.1", self.port), **common)
        deadline = time.monotonic() + 60
        while not port_open(self.port):
            if time.monotonic() > deadline or any(
                p.poll() is not None for p in self.procs.values()
            ):
                raise RuntimeError(f"the stack did not start; see {self.log.name}")
            time.sleep(0.1)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (self.bench_backend,) = cursor.fetchone()
        return self

    def roots(self) -> dict[str, int]:
        """Process trees to measure: web, worker, and (when local) postgres and redis."""
        from agentops.runtime.redis_client import get_redis

        roots = {name: p.pid for name, p in self.procs.items()}
        try:
            stat = Path(f"/proc/{self.bench_backend}/stat").read_text()
            roots["postgres"] = int(stat[stat.rindex(")") + 2 :].split()[1])
        except OSError:  # not on this machine: its CPU cannot be read from here
            pass
        redis_pid = int(get_redis().info("server")["process_id"])
        if Path(f"/proc/{redis_pid}").exists():
            roots["redis"] = redis_pid
        return roots

    def snapshot(self) -> dict[str, float]:
        return cpu_snapshot(self.roots(), exclude=[self.bench_backend])

    def wait_idle(self, timeout: float = 20, window: float = 0.5, quiet_ms: float = 5) -> float:
        """Wait until the product's processes together use under ``quiet_ms`` of CPU in a
        ``window`` (the work a batch of runs leaves behind, such as PostgreSQL's autovacuum,
        finished), so that it is not counted against what comes next; the seconds waited."""
        t0 = time.monotonic()
        before = self.snapshot()
        while time.monotonic() - t0 < timeout:
            time.sleep(window)
            after = self.snapshot()
            if cpu_delta(before, after)["total"] < quiet_ms:
                break
            before = after
        return round(time.monotonic() - t0, 1)

    def wait_for_worker(self, timeout: float = 60) -> None:
        """Block until the worker answers a no-op chain of one hop."""
        run_noop_chain(1, timeout=timeout)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
        if self.log:
            self.log.close()


@contextmanager
def running_stack(**kwargs: Any):
    stack = Stack(**kwargs)
    try:
        yield stack.start()
    finally:
        stack.stop()


def run_noop_chain(hops: int, timeout: float = 30) -> float:
    """Send a chain of ``hops`` no-op tasks; return ms from the first send to the last hop."""
    import uuid

    from agentops.runtime.redis_client import get_redis
    from bench.noop_tasks import noop_hop

    key = f"bench:noop:{uuid.uuid4().hex}"
    t0 = time.time()
    noop_hop.delay(hops, key)
    got = get_redis().blpop([key], timeout=timeout)
    if got is None:
        raise RuntimeError(f"no-op chain of {hops} did not finish within {timeout}s")
    return (float(got[1]) - t0) * 1000


# --- the JSON API -----------------------------------------------------------------------------


class Api:
    """A keep-alive HTTP client per thread, with one bearer token per demo user."""

    def __init__(self, port: int) -> None:
        import io

        from django.core.management import call_command

        self.port = port
        self.tokens = {}
        for username in BOOKING_USERS:  # the documented way to get a token (README)
            out = io.StringIO()
            call_command("issue_token", username, name="bench", stdout=out)
            self.tokens[username] = out.getvalue().strip()
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        # uvicorn closes a keep-alive connection after 5 s idle: never send on one that old.
        if conn is not None and time.monotonic() - self._local.used > 3:
            conn.close()
            conn = None
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self._local.used = time.monotonic()
        return conn

    def call(self, method: str, path: str, user: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.tokens[user]}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = self._conn()
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        if response.getheader("Content-Type", "").startswith("application/json"):
            return response.status, json.loads(payload)
        return response.status, payload


class Requests:
    """Booking requests on distinct half-hour slots, so that every run can succeed."""

    def __init__(
        self, tz: str, days_ahead: int = 20, users: tuple[str, ...] = BOOKING_USERS
    ) -> None:
        self.tz = ZoneInfo(tz)
        self.day0 = datetime.now(self.tz).date() + timedelta(days=days_ahead)
        self.users = users
        self.n = 0
        self._lock = threading.Lock()

    def next(self) -> tuple[str, str]:
        with self._lock:
            n, self.n = self.n, self.n + 1
        day = self.day0 + timedelta(days=n // 24)
        start = datetime(day.year, day.month, day.day, 8, tzinfo=self.tz) + timedelta(
            minutes=30 * (n % 24)
        )
        end = start + timedelta(minutes=30)
        user = self.users[n % len(self.users)]
        text = (
            f"book a room on {start:%Y-%m-%d} {start:%H:%M}-{end:%H:%M} "
            "for 3 people with a projector"
        )
        return user, text


def start_runs(api: Api, requests: Requests, count: int) -> list[str]:
    """POST /api/runs ``count`` times at once (one thread each); return the run ids."""
    ids: list[str | None] = [None] * count
    barrier = threading.Barrier(count)

    def post(i: int) -> None:
        user, text = requests.next()
        barrier.wait()
        status, body = api.call("POST", "/api/runs", user, {"request": text})
        if status != 202:
            raise RuntimeError(f"POST /api/runs answered {status}: {body}")
        ids[i] = body["run_id"]

    threads = [threading.Thread(target=post, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if None in ids:
        raise RuntimeError("a POST /api/runs failed")
    return [i for i in ids if i]


def wait_runs(ids: list[str], timeout: float = 120) -> list[Any]:
    """Poll the database (from the benchmark's own, excluded backend) until every run ended."""
    from agentops.models import AgentRun

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = list(AgentRun.objects.filter(pk__in=ids, finished_at__isnull=False))
        if len(done) == len(ids):
            return done
        time.sleep(0.005)
    raise RuntimeError(f"{len(ids)} runs did not all finish within {timeout}s")


def run_latency_ms(run: Any) -> float:
    return (run.finished_at - run.created_at).total_seconds() * 1000


def run_hops(run: Any) -> int:
    """Pieces of work a run took: one per turn planned plus one per action executed. Since a
    worker continues a run in place, only the first of them (and parallel reads, retries,
    reconciliation) goes through the broker."""
    return run.turn + run.actions.exclude(started_at__isnull=True).count()


# --- measurements -----------------------------------------------------------------------------


def pg_sessions() -> int:
    from django.db import connection

    time.sleep(2.0)  # backends flush their statistics at most once a second, when idle
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def sessions_added(action: Callable[[], Any]) -> int:
    before = pg_sessions()
    action()
    return pg_sessions() - before


def measure_reads(stack: Stack, api: Api, run: Any, reads: int) -> dict[str, Any]:
    """CPU of every process of the product per GET /api/tools and per GET /api/runs/<id>,
    each series started once the stack is idle (wait_idle)."""
    out = {}
    user = run.subject.username
    for name, path in (("tools", "/api/tools"), ("run", f"/api/runs/{run.pk}")):
        for _ in range(20):
            api.call("GET", path, user)
        waited = stack.wait_idle()
        latencies = []
        before = stack.snapshot()
        for _ in range(reads):
            t0 = time.perf_counter()
            status, _ = api.call("GET", path, user)
            latencies.append((time.perf_counter() - t0) * 1000)
            if status != 200:
                raise RuntimeError(f"GET {path} answered {status}")
        delta = cpu_delta(before, stack.snapshot())
        out[name] = {
            "path": path if name == "tools" else "/api/runs/<id>",
            "requests": reads,
            "cpu_ms_per_request": round(delta["total"] / reads, 2),
            "cpu_ms_per_request_by_process": {
                k: round(v / reads, 2) for k, v in delta.items() if k != "total"
            },
            "p50_ms": round(pct(latencies, 50), 2),
            "idle_wait_s": waited,
        }
    return out


def measure_batches(
    stack: Stack, api: Api, requests: Requests, concurrent: int, rounds: int, warmup: int = 3
) -> dict[str, Any]:
    """``rounds`` batches of ``concurrent`` runs started at once: CPU per run, runs/s, p50/p95.

    After ``warmup`` batches that are not measured: the first batches at a new concurrency
    grow the web's pool of PostgreSQL sessions to it (new backends, their caches cold), and each
    session prepares a statement on its fifth use (DB_PREPARED_STATEMENTS), so the first
    batches cost up to half as much again as a server that has been serving (bench/README.md)."""
    for _ in range(warmup):
        wait_runs(start_runs(api, requests, concurrent))
    stack.wait_idle()
    runs, rates = [], []
    cpu_total: dict[str, float] = {}
    for _ in range(rounds):
        before = stack.snapshot()
        t0 = time.monotonic()
        ids = start_runs(api, requests, concurrent)
        done = wait_runs(ids)
        wall = time.monotonic() - t0
        delta = cpu_delta(before, stack.snapshot())
        for k, v in delta.items():
            cpu_total[k] = cpu_total.get(k, 0.0) + v
        rates.append(concurrent / wall)
        runs += done
    latencies = [run_latency_ms(r) for r in runs]
    succeeded = sum(r.status == "succeeded" for r in runs)
    n = len(runs)
    return {
        "concurrent": concurrent,
        "warmup_rounds": warmup,
        "rounds": rounds,
        "runs": n,
        "succeeded": succeeded,
        "not_succeeded": n - succeeded,
        "p50_ms": round(pct(latencies, 50), 1),
        "p95_ms": round(pct(latencies, 95), 1),
        "runs_per_s": round(statistics.median(rates), 1),
        "runs_per_s_by_round": [round(r, 1) for r in rates],
        "cpu_ms_per_run": round(cpu_total["total"] / n, 1),
        "cpu_ms_per_run_by_process": {
            k: round(v / n, 1) for k, v in cpu_total.items() if k != "total"
        },
        "hops_per_run": statistics.median(run_hops(r) for r in runs),
    }


def measure_sequential(api: Api, requests: Requests, count: int) -> dict[str, Any]:
    runs = []
    for _ in range(count):
        user, text = requests.next()
        status, body = api.call("POST", "/api/runs", user, {"request": text})
        if status != 202:
            raise RuntimeError(f"POST /api/runs answered {status}: {body}")
        runs += wait_runs([body["run_id"]])
    latencies = [run_latency_ms(r) for r in runs]
    succeeded = sum(r.status == "succeeded" for r in runs)
    return {
        "runs": len(runs),
        "succeeded": succeeded,
        "not_succeeded": len(runs) - succeeded,
        "p50_ms": round(pct(latencies, 50), 1),
        "p95_ms": round(pct(latencies, 95), 1),
        "hops_per_run": statistics.median(run_hops(r) for r in runs),
    }


def one_run(api: Api, requests: Requests) -> Any:
    user, text = requests.next()
    _, body = api.call("POST", "/api/runs", user, {"request": text})
    return wait_runs([body["run_id"]])[0]


def setup_django() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    from bookings.demo import load_demo_data

    call_command("migrate", verbosity=0)
    load_demo_data()


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--reads", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--worker-concurrency", type=int, default=4)
    parser.add_argument("--worker-pool", default="prefork")
    parser.add_argument(
        "--debug", action="store_true", help="run the stack with DEBUG=true (query logging)"
    )
    args = parser.parse_args()

    setup_django()
    from django.conf import settings

    from agentops.runtime.redis_client import get_redis

    get_redis().flushdb()
    with running_stack(
        worker_concurrency=args.worker_concurrency,
        worker_pool=args.worker_pool,
        extra_env={"DEBUG": str(args.debug).lower()},
    ) as stack:
        stack.wait_for_worker()
        api = Api(stack.port)
        requests = Requests(settings.TIME_ZONE)
        for _ in range(4):  # warm every worker child and the web server
            one_run(api, requests)
        run = one_run(api, requests)
        result = {
            "benchmark": "cpu_probe",
            "settings": {
                "pool": bool(settings.DATABASES["default"].get("OPTIONS", {}).get("pool")),
                "conn_max_age": settings.DATABASES["default"]["CONN_MAX_AGE"],
                "debug": args.debug,
                "worker": f"{args.worker_pool} x{args.worker_concurrency}",
            },
            "pg_sessions_added": {
                "50_get_api_tools": sessions_added(
                    lambda: [api.call("GET", "/api/tools", "e17") for _ in range(50)]
                ),
                "one_two_call_run": sessions_added(lambda: one_run(api, requests)),
            },
            "reads": measure_reads(stack, api, run, args.reads),
            "batch": measure_batches(stack, api, requests, args.concurrent, args.rounds),
            "processes": sorted(stack.roots()),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
