"""Client CPU per Redis round trip of the runtime's own shapes, with the reply parser redis-py
picks (hiredis's C parser when the `hiredis` package is installed, a dependency of the product)
against redis-py's pure-Python parser, in the same run.

    make bench-redis
    REDIS_URL=... .venv/bin/python bench/redis_roundtrip.py [--trips 3000] [--rounds 5]

The shapes are the ones a two-call run sends (bench/README.md, "Issue 25 item 2, fourth pass"):
the rate limiter's count (INCR + EXPIRE, one pipeline), the circuit breaker's check before a
call (PTTL + EXISTS, one pipeline) and the pushing thread's watch check (EXISTS of two groups,
one pipeline). Each round times every parser on every shape in turn (the order rotated per
round), CPU time of this process by `time.process_time`; the figures are medians over the
rounds. Prints one JSON object, `ratio` = with the installed parser / pure Python.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis
from redis._parsers import _HiredisParser, _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE


def shapes(client: redis.Redis) -> dict[str, Callable[[], Any]]:
    def rate_count() -> Any:
        with client.pipeline(transaction=False) as pipe:
            pipe.incr("bench:rate:calls:1:0")
            pipe.expire("bench:rate:calls:1:0", 120)
            return pipe.execute()

    def circuit_check() -> Any:
        with client.pipeline(transaction=False) as pipe:
            pipe.pttl("bench:circuit:open:find_available_rooms")
            pipe.exists("bench:circuit:failures:find_available_rooms")
            return pipe.execute()

    def watch_check() -> Any:
        with client.pipeline(transaction=False) as pipe:
            pipe.exists("bench:watch:run-1")
            pipe.exists("bench:watch:room-7")
            return pipe.execute()

    return {"rate_count": rate_count, "circuit_check": circuit_check, "watch_check": watch_check}


def cpu_us_per_trip(fn: Callable[[], Any], trips: int) -> float:
    started = time.process_time()
    for _ in range(trips):
        fn()
    return (time.process_time() - started) / trips * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trips", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    url = os.environ["REDIS_URL"]
    parsers = {"pure_python": _RESP2Parser, "installed": redis.connection.DefaultParser}
    clients = {
        name: redis.Redis(connection_pool=redis.ConnectionPool.from_url(url, parser_class=cls))
        for name, cls in parsers.items()
    }
    runs = {name: shapes(client) for name, client in clients.items()}
    for fns in runs.values():  # connect and warm up
        for fn in fns.values():
            cpu_us_per_trip(fn, 200)
    samples: dict[str, dict[str, list[float]]] = {p: {s: [] for s in runs[p]} for p in runs}
    order = list(runs)
    for round_no in range(args.rounds):
        for name in order[round_no % 2 :] + order[: round_no % 2]:
            for shape, fn in runs[name].items():
                samples[name][shape].append(cpu_us_per_trip(fn, args.trips))
    figures = {
        name: {shape: round(statistics.median(v), 1) for shape, v in by_shape.items()}
        for name, by_shape in samples.items()
    }
    for client in clients.values():
        client.delete("bench:rate:calls:1:0")
    print(
        json.dumps(
            {
                "benchmark": "redis_roundtrip",
                "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "settings": {"trips": args.trips, "rounds": args.rounds},
                "parsers": {
                    "installed": redis.connection.DefaultParser.__name__,
                    "pure_python": _RESP2Parser.__name__,
                    "hiredis_available": HIREDIS_AVAILABLE,
                    "hiredis_parser": _HiredisParser.__name__,
                },
                "client_cpu_us_per_round_trip": figures,
                "ratio_installed_over_pure_python": {
                    shape: round(figures["installed"][shape] / figures["pure_python"][shape], 2)
                    for shape in figures["installed"]
                },
                "by_round": samples,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
