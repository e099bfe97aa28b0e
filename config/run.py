"""`make run`: embedded servers (unless DATABASE_URL/REDIS_URL), migrations, demo data, a Celery
worker with beat, and the ASGI web server, under a small supervisor: a child that dies is started
again (the worker above all: runs in flight are redelivered and reconciled), the others and the
data stores stay up. Ctrl-C, SIGTERM or SIGHUP (to the launcher or its whole process group, any
number of times) stops every child it started and the embedded servers, once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from config import devservers

PY = sys.executable
# A child that dies this often within the window is not restarted again: the launcher stops.
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopRequested(Exception):  # noqa: N818 -- a request, not a failure
    pass


class Shutdown:
    """Stops what the launcher started, exactly once, whatever signals arrive meanwhile.

    A signal only records the request (the handler never raises, so no signal can cut the
    launcher or its shutdown in half); the launcher checks it between steps and while it
    waits. A process-group SIGTERM reaches the launcher together with its children, and a
    second one often follows while it stops: that changes nothing."""

    def __init__(self, var: Path) -> None:
        self.var = var
        self.children: list[subprocess.Popen] = []
        self.services: devservers.Services | None = None
        self.requested = False
        self.stopping = False
        self.pidfile = var / "run.pid"

    def on_signal(self, signum: int, frame: object) -> None:
        self.requested = True

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self.on_signal)

    def check(self) -> None:
        if self.requested:
            raise StopRequested

    def __call__(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        print("Stopping the web server, the worker and the embedded servers...", file=sys.stderr)
        sys.stderr.flush()
        try:
            for child in self.children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for child in self.children:
                try:
                    child.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
        finally:
            try:
                self._services_down()
            finally:
                self.pidfile.unlink(missing_ok=True)

    def _services_down(self) -> None:
        if self.services is None:
            return
        try:
            if self.services.started_postgres:
                devservers.stop_postgres(self.var)
        finally:
            if self.services.started_redis:
                devservers.stop_redis(self.var)


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    restarts: list[float] = field(default_factory=list)


class Supervisor:
    """Keeps children running. `check()` restarts each child that has exited (and says so);
    it returns False when one died more than MAX_RESTARTS times in RESTART_WINDOW_S, the sign
    of a fault a restart does not cure (then the caller stops everything)."""

    def __init__(
        self,
        children: list[Child],
        *,
        env: dict[str, str],
        spawn: Callable[..., subprocess.Popen] = subprocess.Popen,
        clock: Callable[[], float] = time.monotonic,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
        spawned: list[subprocess.Popen] | None = None,
    ) -> None:
        self.children, self.env = children, env
        self.spawn, self.clock, self.log = spawn, clock, log
        self.spawned = spawned if spawned is not None else []  # every process it started

    def _start(self, child: Child) -> None:
        child.process = self.spawn(child.argv, env=self.env)
        self.spawned.append(child.process)

    def start(self) -> None:
        for child in self.children:
            self._start(child)

    def check(self) -> bool:
        now = self.clock()
        for child in self.children:
            code = child.process.poll() if child.process is not None else None
            if child.process is None or code is None:
                continue
            child.restarts = [t for t in child.restarts if now - t < RESTART_WINDOW_S]
            if len(child.restarts) >= MAX_RESTARTS:
                self.log(
                    f"The {child.name} exited ({code}) {MAX_RESTARTS} times within "
                    f"{RESTART_WINDOW_S:.0f}s; stopping."
                )
                return False
            child.restarts.append(now)
            self.log(f"The {child.name} exited ({code}); starting it again.")
            self._start(child)
        return True

    def alive(self) -> bool:
        return all(c.process is not None and c.process.poll() is None for c in self.children)

    def stop(self, timeout: float = 15) -> None:
        running = [c.process for c in self.children if c.process is not None]
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in running:
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def worker_argv(schedule: str) -> list[str]:
    return [
        *(PY, "-m", "celery", "-A", "config", "worker", "--beat", "--loglevel=WARNING"),
        *("--concurrency=2", "--schedule", schedule),
    ]


def web_argv(host: str, port: int) -> list[str]:
    return [
        *(PY, "-m", "uvicorn", "config.asgi:application", "--host", host, "--port", str(port)),
        # httptools with a bound on a request's head (config.webserver).
        *("--no-access-log", "--http", "config.webserver:BoundedHttpToolsProtocol"),
        # A websocket frame past 64 KiB is closed (1009) by the server before it is buffered
        # (uvicorn's default is 16 MiB); the consumers refuse smaller ones over their own cap.
        *("--ws-max-size", "65536"),
        # No proxy stands in front of `make run`: a client's X-Forwarded-For is not its address
        # (uvicorn believes it from loopback by default). Behind a proxy, TRUSTED_PROXIES.
        "--no-proxy-headers",
    ]


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def main() -> int:
    host = os.environ.get("HOST", "127.0.0.1")
    try:
        port = int(os.environ.get("PORT", "8000"))
    except ValueError:
        print(f"PORT must be a number, not {os.environ['PORT']!r}.", file=sys.stderr)
        return 2
    if not _port_free(host, port):
        print(
            f"Port {port} on {host} is already in use (is another `make run` up?).\n"
            f"Stop that process or choose another port: PORT={port + 1} make run",
            file=sys.stderr,
        )
        return 1

    var = Path(os.environ.get("AGENTOPS_VAR", devservers.DEFAULT_VAR))
    stop = Shutdown(var)
    stop.install()
    children = stop.children
    var.mkdir(parents=True, exist_ok=True)
    stop.pidfile.write_text(f"{os.getpid()}\n")  # `kill "$(cat var/run.pid)"` stops it all
    try:
        services = stop.services = devservers.up(var)
        stop.check()
        env = os.environ | {
            "DATABASE_URL": services.database_url,
            "REDIS_URL": services.redis_url,
            "AGENTOPS_VAR": str(var),
        }
        env.setdefault("SERVE_STATIC", "true")  # no proxy in front of `make run`
        manage = [PY, "manage.py"]
        subprocess.run([*manage, "migrate", "--noinput"], env=env, check=True)
        stop.check()
        subprocess.run([*manage, "seed_demo"], env=env, check=True)
        stop.check()
        supervisor = Supervisor(
            [
                Child("Celery worker", worker_argv(str(var / "celerybeat-schedule"))),
                Child("web server", web_argv(host, port)),
            ],
            env=env,
            spawned=children,  # what Shutdown stops, restarted children included
        )
        supervisor.start()
        # Print the banner once the web server answers, after the worker's start-up chatter.
        deadline = time.monotonic() + 30
        while not devservers.port_open(port, host) and time.monotonic() < deadline:
            stop.check()
            if not supervisor.alive():
                break
            time.sleep(0.2)
        time.sleep(1.0)
        stop.check()
        from bookings.demo import USERS, demo_password

        logins = "\n".join(f"    {u[0]:<6} {demo_password(u[0])}" for u in USERS)
        print(
            f"\n  Meeting rooms with a governed assistant: http://{host}:{port}/\n"
            f"  Demo logins (dev only):\n{logins}\n"
            f"  Database: {services.database_url}\n  Redis:    {services.redis_url}\n"
            "  Ctrl-C stops the web server, the worker and the embedded servers.\n",
            flush=True,
        )
        while True:
            stop.check()  # before a restart: a stop's SIGTERM may have ended the child
            if not supervisor.check():
                return 1
            time.sleep(0.2)
    except StopRequested:
        return 0
    except subprocess.CalledProcessError as exc:
        if stop.requested:  # the signal reached the setup step too
            return 0
        print(f"Setup step failed: {' '.join(map(str, exc.cmd))}", file=sys.stderr)
        return 1
    finally:
        stop()


if __name__ == "__main__":
    sys.exit(main())
