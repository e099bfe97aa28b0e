"""`make run`: embedded servers (unless DATABASE_URL/REDIS_URL), migrations, demo data, a Celery
worker with beat, and the ASGI web server. Ctrl-C stops every child it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from config import devservers

PY = sys.executable


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

    services = devservers.up(devservers.DEFAULT_VAR)
    env = os.environ | {"DATABASE_URL": services.database_url, "REDIS_URL": services.redis_url}
    env.setdefault("SERVE_STATIC", "true")  # no proxy in front of `make run`
    children: list[subprocess.Popen] = []

    def stop(*_: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
        devservers.down(
            devservers.DEFAULT_VAR,
            postgres=services.started_postgres,
            redis=services.started_redis,
        )

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        manage = [PY, "manage.py"]
        subprocess.run([*manage, "migrate", "--noinput"], env=env, check=True)
        subprocess.run([*manage, "seed_demo"], env=env, check=True)
        beat_schedule = devservers.DEFAULT_VAR / "celerybeat-schedule"
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
            if any(child.poll() is not None for child in children):
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
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        print("A child process exited; stopping the rest.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except subprocess.CalledProcessError as exc:
        print(f"Setup step failed: {' '.join(map(str, exc.cmd))}", file=sys.stderr)
        return 1
    finally:
        stop()


if __name__ == "__main__":
    sys.exit(main())
