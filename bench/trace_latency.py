"""How fast a committed trace event reaches the pages watching its run, over the real stack.

uvicorn serves config.asgi (Channels, the Redis channel layer) on this checkout's PostgreSQL and
Redis; N websocket subscribers (default 50, signed in as the run's owner) watch one run, as the
run card does (`format=html`, server-rendered fragments) or as JSON. This process appends events
with `trace_append`, one transaction per event, and notes when each commit returned; each
subscriber notes when each event arrived. Measured in the same run:

- latency: events paced (default 20/s): commit returned -> received, p50/p95 over every
  (subscriber, event), for the card's fragments and for JSON;
- sustained: events appended back to back: events per second from the first commit until every
  subscriber has the last event (and the commit rate alone);
- baseline: a bare channel-layer `group_send` -> `receive` round trip to as many channels of
  one group (the Redis hop every push takes), p50/p95.

A discarded warm-up (20 events each way) goes first: the first fragment compiles the card's
template, and on a busy machine that stall alone backs the paced phase up for seconds.

    make bench-trace                                   # throwaway embedded servers
    .venv/bin/python bench/trace_latency.py [--subscribers 50] [--events 200] [--burst 200]

Prints one JSON object with the targets (p50 <= 50 ms, p95 <= 200 ms) and whether each is met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "false")

TARGETS = {"p50_ms_max": 50.0, "p95_ms_max": 200.0}
SEQ_HTML = re.compile(rb'data-seq="(\d+)"')


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, Any]:
    return {
        "samples": len(values),
        "p50_ms": round(pct(values, 50), 2),
        "p95_ms": round(pct(values, 95), 2),
        "max_ms": round(max(values), 2),
    }


def database_url() -> str:
    from django.db import connection

    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgresql://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def start_web(log: Any) -> tuple[subprocess.Popen, int]:
    from django.conf import settings

    from config.devservers import free_port, port_open
    from config.run import web_argv

    port = free_port()
    env = os.environ | {
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "PORT": str(port),  # the websocket Origin must match scheme, host and port exactly
    }
    proc = subprocess.Popen(
        web_argv("127.0.0.1", port),  # as `make run` starts it
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not port_open(port):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"uvicorn did not start; see {log.name}")
        time.sleep(0.1)
    return proc, port


def watched_run() -> tuple[Any, str]:
    """A run of the demo employee e17 and a session cookie of theirs."""
    from django.test import Client

    from accounts.models import User
    from agentops.models import AgentRun
    from agentops.runtime.direct import tool_call_governed

    user = User.objects.get(username="e17")
    tool_call_governed(user=user, name="list_my_bookings", arguments={})
    client = Client()
    client.force_login(user)
    return AgentRun.objects.filter(subject=user).latest("created_at"), client.cookies[
        "sessionid"
    ].value


def append_events(run_id: Any, count: int, interval: float) -> dict[int, float]:
    """Append ``count`` events, one transaction each; when each commit returned."""
    from django.db import connection, transaction

    from agentops.models import AgentRun, EventKind
    from agentops.runtime.trace import trace_append

    run = AgentRun.objects.get(pk=run_id)
    committed: dict[int, float] = {}
    try:
        for i in range(count):
            with transaction.atomic():
                event = trace_append(
                    run=run,
                    kind=EventKind.MODEL_STEP,
                    payload={"turn": i, "proposals": [], "message": "bench", "outcome": ""},
                )
            committed[event.seq] = time.perf_counter()
            if interval:
                time.sleep(interval)
    finally:
        connection.close()
    return committed


DEFLATE = {"compression": "deflate"}  # what browsers negotiate; --no-deflate turns it off


async def subscriber(
    url: str,
    cookie: str,
    origin: str,
    last: int,
    html: bool,
    ready: asyncio.Event,
    received: dict[int, float],
) -> None:
    """Note into ``received`` when each event arrives, until the last one (or a timeout)."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    async with connect(
        url,
        origin=origin,
        additional_headers={"Cookie": f"sessionid={cookie}"},
        max_size=None,
        **DEFLATE,
    ) as ws:
        ready.set()
        try:
            async for message in ws:
                now = time.perf_counter()
                if html:
                    seq = int(SEQ_HTML.search(message.encode()).group(1))
                else:
                    seq = json.loads(message)["seq"]
                received[seq] = now
                if seq >= last:
                    return
        except ConnectionClosed:  # counted: its missing events show in `missing`
            received[-1] = 0.0


async def phase(
    *, port: int, run: Any, cookie: str, subscribers: int, events: int, interval: float, html: bool
) -> dict[str, Any]:
    from agentops.models import AgentRun

    after = await asyncio.to_thread(
        lambda: AgentRun.objects.values_list("event_seq", flat=True).get(pk=run.pk)
    )
    query = f"after={after}" + ("&format=html&lang=en" if html else "")
    url = f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/?{query}"
    origin = f"http://127.0.0.1:{port}"
    readies = [asyncio.Event() for _ in range(subscribers)]
    received: list[dict[int, float]] = [{} for _ in readies]
    tasks = [
        asyncio.create_task(subscriber(url, cookie, origin, after + events, html, ready, got))
        for ready, got in zip(readies, received, strict=True)
    ]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
    await asyncio.sleep(0.5)  # every consumer has joined the group
    committed = await asyncio.to_thread(append_events, run.pk, events, interval)
    # A socket still waiting after 60 s never got some event: counted in `missing`/`stalled`.
    _, stalled = await asyncio.wait(tasks, timeout=60)
    for task in stalled:
        task.cancel()
    await asyncio.gather(*stalled, return_exceptions=True)
    latencies = [
        (got[seq] - committed[seq]) * 1000 for got in received for seq in committed if seq in got
    ]
    missing = sum(1 for got in received for seq in committed if seq not in got)
    dropped = sum(1 for got in received if got.pop(-1, None) is not None)
    first, last = min(committed.values()), max(max(got.values()) for got in received if got)
    return {
        "subscribers": subscribers,
        "events": events,
        "latency": summary(latencies),
        "missing": missing,
        "connections_lost": dropped,
        "stalled_subscribers": len(stalled),
        "events_per_s_delivered_to_all": round(events / (last - first), 1),
        "events_per_s_committed": round(events / (max(committed.values()) - first), 1)
        if events > 1
        else None,
    }


async def baseline(subscribers: int, messages: int, interval: float) -> dict[str, Any]:
    """A bare channel-layer group_send -> receive round trip to ``subscribers`` channels."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    group = f"bench.{time.time_ns()}"
    channels = [await layer.new_channel() for _ in range(subscribers)]
    for channel in channels:
        await layer.group_add(group, channel)
    latencies: list[float] = []

    async def receive(channel: str) -> None:
        for _ in range(messages):
            message = await layer.receive(channel)
            latencies.append((time.perf_counter() - message["sent"]) * 1000)

    receivers = [asyncio.create_task(receive(c)) for c in channels]
    await asyncio.sleep(0.2)
    for i in range(messages):
        await layer.group_send(group, {"type": "bench", "i": i, "sent": time.perf_counter()})
        await asyncio.sleep(interval)
    await asyncio.wait_for(asyncio.gather(*receivers), 60)
    for channel in channels:
        await layer.group_discard(group, channel)
    return {"subscribers": subscribers, "messages": messages, "latency": summary(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscribers", type=int, default=50)
    parser.add_argument("--events", type=int, default=200, help="paced events per latency phase")
    parser.add_argument("--rate", type=float, default=20.0, help="paced events per second")
    parser.add_argument("--burst", type=int, default=200, help="back-to-back events")
    parser.add_argument("--no-deflate", action="store_true", help="no permessage-deflate")
    parser.add_argument(
        "--phases", default="baseline_group_send,card_html,json,sustained_card_html"
    )
    args = parser.parse_args()
    if args.no_deflate:
        DEFLATE["compression"] = None

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from bookings.demo import load_demo_data

    call_command("migrate", verbosity=0)
    load_demo_data()
    run, cookie = watched_run()
    with open("/proc/loadavg") as f:
        load_before = f.read().split()[:3]
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115
        "w", prefix="bench-trace-", suffix=".log", delete=False
    )
    web, port = start_web(log)
    interval = 1 / args.rate
    common = {"port": port, "run": run, "cookie": cookie, "subscribers": args.subscribers}
    try:
        result: dict[str, Any] = {"benchmark": "trace_latency"}
        phases = {
            "baseline_group_send": lambda: baseline(args.subscribers, args.events // 2, interval),
            "card_html": lambda: phase(**common, events=args.events, interval=interval, html=True),
            "json": lambda: phase(**common, events=args.events, interval=interval, html=False),
            "sustained_card_html": lambda: phase(
                **common, events=args.burst, interval=0, html=True
            ),
        }
        for html in (True, False):  # discarded: template compilation, first connections
            asyncio.run(phase(**common, events=20, interval=interval, html=html))
        for name in args.phases.split(","):
            result[name] = asyncio.run(phases[name]())
            print(name, json.dumps(result[name]), file=sys.stderr, flush=True)
    finally:
        os.killpg(web.pid, 15)
        web.wait(30)
        log.close()
    result["permessage_deflate"] = DEFLATE["compression"] is not None
    if "card_html" in result and "baseline_group_send" in result:
        card = result["card_html"]["latency"]
        base = result["baseline_group_send"]["latency"]
        result["ratio_p50_vs_baseline"] = round(card["p50_ms"] / max(base["p50_ms"], 0.01), 1)
        result["targets"] = {
            "p50_ms": {"value": card["p50_ms"], "max": TARGETS["p50_ms_max"]},
            "p95_ms": {"value": card["p95_ms"], "max": TARGETS["p95_ms_max"]},
        }
        for target in result["targets"].values():
            target["met"] = target["value"] <= target["max"]
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[:3]
    result["machine"] = {
        "cpus": os.cpu_count(),
        "loadavg_before_after": [load_before, load_after],
        "python": platform.python_version(),
        "postgres": connection.cursor().connection.info.server_version,
        "channel_layer": settings.CHANNEL_LAYERS["default"]["BACKEND"],
        "hostname": socket.gethostname(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
