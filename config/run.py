"""`make run`: embedded servers (unless DATABASE_URL/REDIS_URL), migrations, demo data, a Celery
worker with beat, and the ASGI web server. Ctrl-C, SIGTERM or SIGHUP (to the launcher or its
whole process group, any number of times) stops every child it started and the embedded
servers, once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from config import devservers

PY = sys.executable
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
        beat_schedule = var / "celerybeat-schedule"
        children.append(
            subprocess.Popen(
                [
                    PY,
                    "-m",
                    "celery",
                    "-A",
                    "config",
                    "worker",
                    "--beat",
                    "--loglevel=WARNING",
                    "--concurrency=2",
                    "--schedule",
                    str(beat_schedule),
                ],
                env=env,
            )
        )
        children.append(
            subprocess.Popen(
                [
                    PY,
                    "-m",
                    "uvicorn",
                    "config.asgi:application",
                    "--host",
                    host,
                    "--port",
                    str(port),
                    "--no-access-log",
                ],
                env=env,
            )
        )
        # Print the banner once the web server answers, after the worker's start-up chatter.
        deadline = time.monotonic() + 30
        while not devservers.port_open(port, host) and time.monotonic() < deadline:
            stop.check()
            if any(child.poll() is not None for child in children):
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
        while all(child.poll() is None for child in children):
            stop.check()
            time.sleep(0.2)
        stop.check()
        print("A child process exited; stopping the rest.", file=sys.stderr)
        return 1
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
