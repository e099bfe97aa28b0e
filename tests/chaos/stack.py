"""Real processes of the product for the chaos tests: Celery workers (with or without beat) and
uvicorn web servers, as `make run` starts them, against the test database and the test Redis.
Each is its own process group, so a SIGKILL takes the worker and every child with it.

Also the faults that are not processes: restarting Redis on the same port (its data saved and
loaded again, as a restarted server with persistence does), and ending PostgreSQL sessions from
another connection (`pg_terminate_backend`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from config.run import web_argv

ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgresql://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def wait_for(predicate: Any, *, timeout: float, message: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


@dataclass
class Stack:
    """The processes a test started; `stop_all` ends every one of them (by its own id)."""

    logs: Path
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    serial: int = 0

    def _env(self, name: str, extra: dict[str, str] | None) -> dict[str, str]:
        return (
            os.environ
            | {
                "DATABASE_URL": database_url(),
                "REDIS_URL": settings.REDIS_URL,
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "DEBUG": "false",
                "AGENT_SWEEP_SECONDS": "1",
                "AGENT_RATE_LIMIT_PER_MINUTE": "100000",
                "AGENT_RUN_RATE_LIMIT_PER_MINUTE": "100000",
                "DB_POOL_MIN_SIZE": "1",
                # libpq names their sessions: the faults end theirs, never this process's.
                "PGAPPNAME": f"chaos-{name}",
            }
            | self.env
            | (extra or {})
        )

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None) -> subprocess.Popen:
        self.serial += 1
        log = (self.logs / f"{self.serial:02d}-{name}.log").open("w")
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=self._env(name, env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def worker(
        self,
        name: str,
        *,
        beat: bool = False,
        pool: str = "threads",
        concurrency: int = 4,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen:
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            f"--pool={pool}",
            f"--concurrency={concurrency}",
            "--loglevel=INFO",
            "--without-mingle",
            "--without-gossip",
            "-n",
            f"{name}@%h",
            "-Q",
            settings.CELERY_TASK_DEFAULT_QUEUE,
        ]
        if beat:
            cmd += ["--beat", "--schedule", str(self.logs / f"beat-{name}-{self.serial}")]
        return self._spawn(name, cmd, env)

    def web(self, name: str, port: int) -> subprocess.Popen:
        from config.devservers import port_open

        proc = self._spawn(name, web_argv("127.0.0.1", port), None)
        wait_for(
            lambda: port_open(port) or proc.poll() is not None,
            timeout=60,
            message=f"web server {name} on port {port}",
        )
        assert proc.poll() is None, f"{name} exited; see {self.logs}"
        return proc

    def wait_ready(self, name: str, timeout: float = 60) -> None:
        """Until worker ``name`` answers a ping through the broker (it consumes then)."""
        from config.celery import app

        proc = self.procs[name]

        def answered() -> bool:
            assert proc.poll() is None, f"worker {name} exited; see {self.logs}"
            # A connection of its own each time: a pooled one may be from before a Redis restart.
            try:
                with app.connection_for_write() as conn:
                    replies = app.control.ping(timeout=0.5, connection=conn) or []
            except (OSError, OperationalError, RedisError):
                return False
            return any(name in key for reply in replies for key in reply)

        wait_for(answered, timeout=timeout, message=f"worker {name} to answer a ping", interval=0)

    def kill(self, name: str) -> None:
        """SIGKILL: no shutdown, no acknowledgement, no cleanup."""
        proc = self.procs.pop(name)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(20)

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)


# --- Redis ------------------------------------------------------------------------------------


def redis_restart(*, down_for: float = 0.0, keep_data: bool = True) -> float:
    """Restart the Redis server behind settings.REDIS_URL on the same port. With ``keep_data``
    SHUTDOWN SAVE writes its data (the broker's queues and unacknowledged messages, the channel
    layer's groups) and the new server loads it; without, everything in it is gone, as after a
    crash of a server without persistence. Returns the seconds it was unreachable."""
    from redis import Redis

    from config.devservers import _redis_bin, port_open

    client = Redis.from_url(settings.REDIS_URL)
    info = client.info("server")
    config = client.config_get("*")
    port = int(info["tcp_port"])
    pid = int(info["process_id"])
    args = [
        _redis_bin(),
        "--port",
        str(port),
        "--bind",
        config.get("bind", "127.0.0.1").split()[0],
        "--daemonize",
        "yes",
        "--pidfile",
        config["pidfile"],
        "--dir",
        config["dir"],
        "--logfile",
        config["logfile"],
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    started = time.monotonic()
    with contextlib.suppress(Exception):  # the server closes the connection as it goes down
        client.shutdown(save=keep_data, nosave=not keep_data)
    client.close()

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return not port_open(port)
        return False

    wait_for(gone, timeout=30, message="Redis to shut down")
    if not keep_data:
        Path(config["dir"], config.get("dbfilename") or "dump.rdb").unlink(missing_ok=True)
    if down_for:
        time.sleep(down_for)  # the outage itself is the fault being injected
    subprocess.run(args, check=True, capture_output=True)
    wait_for(lambda: port_open(port), timeout=30, message="Redis to come back")
    wait_for(lambda: _loaded(port), timeout=30, message="Redis to load its data")
    return time.monotonic() - started


def _loaded(port: int) -> bool:
    from redis import Redis
    from redis.exceptions import BusyLoadingError, ConnectionError

    try:
        return Redis(port=port).info("persistence")["loading"] == 0
    except (BusyLoadingError, ConnectionError):
        return False


def redis_restartable() -> bool:
    """Only a Redis this test run owns (the embedded one of `make test`) is restarted."""
    return bool(os.environ.get("AGENTOPS_VAR")) and not os.environ.get("CHAOS_NO_REDIS_RESTART")


# --- PostgreSQL -------------------------------------------------------------------------------


def pg_terminate_others() -> int:
    """End every session the test's processes (workers, web servers) hold on the test
    database, idle or in the middle of a transaction. Returns how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name LIKE 'chaos-%%'"
        )
        return cursor.fetchone()[0]
