"""`make run`: embedded servers (unless DATABASE_URL/REDIS_URL), migrations, demo data, a Celery
worker with beat, and the ASGI web server, under a small supervisor: a child that dies is started
again (the worker above all: runs in flight are redelivered and reconciled), the others and the
data stores stay up. Ctrl-C stops every child it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from config import devservers

PY = sys.executable
# A child that dies this often within the window is not restarted again: the launcher stops.
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
# uvicorn: h11 refuses a request whose headers exceed this many bytes (httptools has no such
# limit: a 4 MB header was accepted); config.security.HeaderLimits caps their number too.
MAX_HEADER_BYTES = 32768


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


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
    ) -> None:
        self.children, self.env = children, env
        self.spawn, self.clock, self.log = spawn, clock, log

    def start(self) -> None:
        for child in self.children:
            child.process = self.spawn(child.argv, env=self.env)

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
            child.process = self.spawn(child.argv, env=self.env)
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
        *("--no-access-log", "--http", "h11"),
        *("--h11-max-incomplete-event-size", str(MAX_HEADER_BYTES)),
    ]


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

    services = devservers.up(devservers.DEFAULT_VAR)
    env = os.environ | {"DATABASE_URL": services.database_url, "REDIS_URL": services.redis_url}
    env.setdefault("SERVE_STATIC", "true")  # no proxy in front of `make run`
    beat_schedule = str(devservers.DEFAULT_VAR / "celerybeat-schedule")
    supervisor = Supervisor(
        [
            Child("Celery worker", worker_argv(beat_schedule)),
            Child("web server", web_argv(host, port)),
        ],
        env=env,
    )

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        manage = [PY, "manage.py"]
        subprocess.run([*manage, "migrate", "--noinput"], env=env, check=True)
        subprocess.run([*manage, "seed_demo"], env=env, check=True)
        supervisor.start()
        # Print the banner once the web server answers, after the worker's start-up chatter.
        deadline = time.monotonic() + 30
        while not devservers.port_open(port, host) and time.monotonic() < deadline:
            if not supervisor.alive():
                break
            time.sleep(0.2)
        time.sleep(1.0)
        from bookings.demo import USERS, demo_password

        logins = "\n".join(f"    {u[0]:<6} {demo_password(u[0])}" for u in USERS)
        print(
            f"\n  Meeting rooms with a governed assistant: http://{host}:{port}/\n"
            f"  Demo logins (dev only):\n{logins}\n"
            f"  Database: {services.database_url}\n  Redis:    {services.redis_url}\n"
            "  Ctrl-C stops the web server, the worker and the embedded servers.\n",
            flush=True,
        )
        while supervisor.check():
            time.sleep(0.5)
        return 1
    except KeyboardInterrupt:
        return 0
    except subprocess.CalledProcessError as exc:
        print(f"Setup step failed: {' '.join(map(str, exc.cmd))}", file=sys.stderr)
        return 1
    finally:
        supervisor.stop()
        devservers.down(
            devservers.DEFAULT_VAR,
            postgres=services.started_postgres,
            redis=services.started_redis,
        )


if __name__ == "__main__":
    sys.exit(main())
