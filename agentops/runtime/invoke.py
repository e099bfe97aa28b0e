"""Calling one tool: per-tool timeout, fault injection, envelope and size checks.

The handler runs on a pool thread so that the caller can stop waiting at the timeout. A write
that times out may still commit on that thread: that is exactly an unknown outcome.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from django.db import (
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
)
from pydantic import BaseModel, ValidationError

from agentops.contract import (
    CallContext,
    LostReceiptError,
    Reason,
    Signal,
    ToolError,
    ToolSpec,
    envelope_bytes,
    failure,
    is_page,
)
from agentops.runtime.circuit import circuit_check, circuit_record
from agentops.runtime.queue import enqueue_reconcile
from agentops.runtime.redis_client import get_redis
from agentops.runtime.timing import FAULT_PAUSE_LIMIT_S

log = logging.getLogger(__name__)
TOOL_CRASHED = "tool_crashed"
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tool")


class TransientDatabaseError(Exception):
    """Injected: the database refused the call before it ran."""


def release_key(run_id: str) -> str:
    return f"agentops:fault:release:{run_id}"


def faults_for(faults: list[dict[str, Any]], tool: str, call_number: int) -> list[dict[str, Any]]:
    """The injected faults that apply to the Nth call (1-based, attempts included) of a tool."""
    return [
        f
        for f in faults
        if f.get("tool") in (tool, "*") and (not f.get("calls") or call_number in f["calls"])
    ]


def _wait_for_release(run_id: str) -> None:
    deadline = time.monotonic() + FAULT_PAUSE_LIMIT_S
    while not get_redis().exists(release_key(run_id)) and time.monotonic() < deadline:
        time.sleep(0.02)


def inflight_key(idempotency_key: str) -> str:
    return f"agentops:inflight:{idempotency_key}"


class _Abandoned:
    """A write whose caller stopped waiting (its timeout) while its thread still runs: the key
    is marked in flight until the thread ends, so a reconciler asking "what happened under this
    key?" is told to wait rather than that nothing was written (the thread may yet commit). The
    lock orders the caller's mark and the thread's end, so no mark outlives its thread."""

    def __init__(self, key: str | None, action_id: str | None = None) -> None:
        self.key, self.action_id, self.lock = key, action_id, threading.Lock()
        self.gone = threading.Event()  # the caller stopped waiting
        self.done = False

    def caller_leaves(self, ttl_s: int) -> None:
        with self.lock:
            self.gone.set()
            if self.key and not self.done:
                get_redis().set(inflight_key(self.key), "1", ex=ttl_s)

    def thread_ends(self) -> None:
        with self.lock:
            self.done = True
            if not (self.key and self.gone.is_set()):
                return
            get_redis().delete(inflight_key(self.key))
        if self.action_id:  # the reconciler was told to wait for this: ask it again now
            enqueue_reconcile(self.action_id)


def _call(
    spec: ToolSpec,
    ctx: CallContext,
    args: BaseModel,
    faults: list[dict[str, Any]],
    abandoned: _Abandoned,
) -> dict[str, Any]:
    kinds = {f["kind"]: f for f in faults}
    caller_gone = abandoned.gone
    try:
        if "db_error" in kinds:
            raise TransientDatabaseError("injected transient database error")
        if "timeout" in kinds:
            # Overrun the timeout by construction, not by racing it: answer only once the
            # caller has stopped waiting.
            caller_gone.wait(FAULT_PAUSE_LIMIT_S)
            raise TransientDatabaseError("injected timeout: the call did not run")
        if "pause" in kinds:
            _wait_for_release(ctx.run_id)
        if ctx.max_output_bytes != spec.meta.max_output_bytes:  # the cap its page fits to
            ctx = dataclasses.replace(ctx, max_output_bytes=spec.meta.max_output_bytes)
        try:
            envelope = spec.handler(ctx, args)
        except ToolError as exc:
            return exc.envelope()
        if "pause_after_commit" in kinds:
            _wait_for_release(ctx.run_id)
        if "lose_receipt" in kinds:
            raise LostReceiptError("injected: response lost after the write committed")
        return envelope
    finally:
        # As at the end of a request: a broken or expired connection is dropped and a pooled
        # one goes back to the pool (a persistent one, CONN_MAX_AGE > 0, stays with the thread).
        if connection.connection is not None:
            close_old_connections()
        abandoned.thread_ends()


def invoke(
    spec: ToolSpec, ctx: CallContext, args: BaseModel, *, faults: list[dict[str, Any]]
) -> tuple[dict[str, Any], Signal]:
    """Run the tool and return (envelope, signal): refused at once while its circuit is open
    (runtime.circuit), its answer checked against its output model (failing closed), cut to
    its size cap."""
    circuit = circuit_check(spec.name)
    if circuit.refusal is not None:
        return circuit.refusal, Signal.YELLOW
    # What a circuit counts: the tool's surroundings failing (its database, server, network,
    # a time-out). Not a caller's own refusal (red: a conflict, invalid input), nor a crash of
    # our own code (a bug), which would otherwise refuse the tool to every employee because a
    # few requests hit it.
    try:
        envelope, signal = _invoke(spec, ctx, args, faults=faults)
        failing = signal in (Signal.YELLOW, Signal.UNKNOWN)
    except _CrashedError as crash:
        envelope, signal, failing = crash.envelope, crash.signal, crash.infrastructure
    if not faults:  # an injected fault (tests, drills) says nothing of the tool's health
        circuit_record(
            spec.name,
            failed=failing,
            failures_counted=circuit.failures_counted,
            cause=f"{envelope.get('code', '')}: {envelope.get('message', '')}" if failing else "",
        )
    return envelope, signal


class _CrashedError(Exception):
    """The tool raised: its answer (``crashed``), and whether the cause was infrastructure."""

    def __init__(self, envelope: dict[str, Any], signal: Signal, infrastructure: bool) -> None:
        super().__init__(envelope["message"])
        self.envelope, self.signal, self.infrastructure = envelope, signal, infrastructure


def _invoke(
    spec: ToolSpec, ctx: CallContext, args: BaseModel, *, faults: list[dict[str, Any]]
) -> tuple[dict[str, Any], Signal]:
    abandoned = _Abandoned(
        None if spec.meta.readonly else ctx.idempotency_key, ctx.action_id or None
    )
    future = _POOL.submit(_call, spec, ctx, args, faults, abandoned)
    try:
        envelope = future.result(timeout=spec.meta.timeout_s)
    except FutureTimeout:
        # The mark lasts as long as a thread may hang (FAULT_PAUSE_LIMIT_S bounds the injected
        # ones), never for ever: past it the reconciler asks the tool as usual.
        abandoned.caller_leaves(ttl_s=max(60, int(FAULT_PAUSE_LIMIT_S) * 2))
        if spec.meta.readonly:
            return failure(
                Reason.TIMEOUT,
                "tool_timeout",
                f"{spec.name} did not answer within {spec.meta.timeout_s:.1f}s.",
                "Wait a moment, then try once more.",
            ), Signal.YELLOW
        return _unknown(spec, "timed out"), Signal.UNKNOWN
    except TransientDatabaseError as exc:
        return failure(
            Reason.UNAVAILABLE, "database_unavailable", str(exc), "Try again shortly.", 200
        ), Signal.YELLOW
    except LostReceiptError:
        return _unknown(spec, "lost its response"), Signal.UNKNOWN
    except (OperationalError, InterfaceError) as exc:
        if spec.meta.readonly:
            return failure(
                Reason.UNAVAILABLE,
                "database_unavailable",
                "The database did not answer.",
                "Try again shortly.",
                200,
            ), Signal.YELLOW
        return _unknown(spec, f"failed mid-call ({type(exc).__name__})"), Signal.UNKNOWN
    except Exception as exc:  # a bug or a database refusal inside the tool: never a 500
        log.warning("tool %s raised", spec.name, exc_info=exc)
        raise _CrashedError(
            crashed(spec, exc),
            Signal.YELLOW if spec.meta.readonly else Signal.UNKNOWN,
            isinstance(exc, INFRASTRUCTURE_ERRORS),
        ) from exc
    invalid = _off_model(spec, envelope)
    if invalid is not None:
        return invalid
    size = _size(envelope)
    if size > spec.meta.max_output_bytes:
        return output_cut(spec, envelope, size)
    return envelope, Signal(envelope["signal"])


def _off_model(spec: ToolSpec, envelope: dict[str, Any]) -> tuple[dict[str, Any], Signal] | None:
    """A green answer whose data is not what the tool's output model says is never passed on
    (tool output is untrusted, a gateway tool's above all): a read's is refused; a write's may
    have taken effect, so its outcome is unknown and reconciled from its receipt by key."""
    if envelope.get("signal") != Signal.GREEN:
        return None
    try:
        # As JSON, the way the answer leaves: dates as text are valid under a strict model.
        spec.output_model.model_validate_json(json.dumps(envelope.get("data"), default=str))
    except ValidationError as exc:
        log.warning("tool %s answered outside its output model: %s", spec.name, exc)
        if not spec.meta.readonly:
            return _unknown(spec, "answered outside its output model"), Signal.UNKNOWN
        return failure(
            Reason.OUTPUT_INVALID,
            "output_invalid",
            f"{spec.name} answered outside its declared output.",
            "The answer was not passed on; try another tool or report it.",
        ), Signal.RED
    return None


def _size(value: Any) -> int:
    return envelope_bytes(value)


CUT_STRING_CHARS = 200
PAGE_TOO_LARGE = "page_too_large"


def output_cut(
    spec: ToolSpec, envelope: dict[str, Any], size: int
) -> tuple[dict[str, Any], Signal]:
    """An answer over the tool's max_output_bytes is cut to fit, with a hint, never passed
    whole: first the longest list of its data loses items from the end, then long strings are
    shortened; what still does not fit is refused. Receipts (ids, statuses) are short fields
    and survive the cut.

    A page of a longer list (``is_page``: its data says has_more or next_cursor) never loses
    items here: the runtime cannot make the cursor to the items it would drop, and a page cut
    without one reads as the whole (has_more false, or a cursor that skips them). Its long
    strings may be shortened; if it still does not fit, it is refused (``page_too_large``).
    A tool that pages fits its own page to the cap (agentops.contract.paging), so this is a
    backstop for one that does not."""
    cap = spec.meta.max_output_bytes
    cut = json.loads(json.dumps(envelope, default=str))
    cut["truncated"] = True
    cut["hint"] = (
        f"{spec.name} returned {size} bytes, over its {cap}: the answer was cut. "
        "Narrow the query or page with a smaller limit."
    )
    data = cut.get("data")
    paged = is_page(cut)
    if paged:
        cut["hint"] = (
            f"{spec.name} returned {size} bytes, over its {cap}: long texts in it were "
            "shortened; no item was left out."
        )
    lists = (
        []
        if paged
        else sorted((v for v in data.values() if isinstance(v, list)), key=len, reverse=True)
        if isinstance(data, dict)
        else [data]
        if isinstance(data, list)
        else []
    )
    for items in lists:
        while items and _size(cut) > cap:
            items.pop()
    if _size(cut) > cap:
        cursor = data.get("next_cursor") if isinstance(data, dict) else None
        _shorten_strings(data)
        if cursor is not None:  # the way on is kept whole, or the page is refused
            data["next_cursor"] = cursor
    if paged and _size(cut) > cap:
        return failure(
            Reason.OUTPUT_TOO_LARGE,
            PAGE_TOO_LARGE,
            f"{spec.name} answered a page of {size} bytes, over its {cap}: it was not passed "
            "on, since a page cut here would hide the rest of the list.",
            "Ask again with a smaller limit (and the same cursor).",
        ), Signal.RED
    if _size(cut) > cap:
        return failure(
            Reason.OUTPUT_TOO_LARGE,
            "output_too_large",
            f"{spec.name} returned {size} bytes, over its {cap}.",
            "Narrow the query or page with a smaller limit.",
        ), Signal.RED
    return cut, Signal(cut["signal"])


def _shorten_strings(value: Any) -> None:
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in list(children):
        if isinstance(child, str) and len(child) > CUT_STRING_CHARS:
            value[key] = child[: CUT_STRING_CHARS - 1] + "…"
        else:
            _shorten_strings(child)


def _unknown(spec: ToolSpec, what: str) -> dict[str, Any]:
    return failure(
        Reason.UNKNOWN_OUTCOME,
        "unknown_outcome",
        f"{spec.name} {what}; whether it took effect is unknown.",
        "Do not retry: the host is checking what happened under this call's idempotency key.",
    )


# Exceptions that say the tool's surroundings failed (a connection, a socket, a time-out),
# not its code: of the crashes, only these count towards its circuit (invoke).
INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # ConnectionError, TimeoutError, socket errors
    OperationalError,
    InterfaceError,
)


def crashed(spec: ToolSpec, exc: BaseException) -> dict[str, Any]:
    """A tool raised instead of answering. A read is transient; a write's outcome is settled
    by the recorder from the tool's receipt lookup (agentops.runtime.recorder)."""
    return failure(
        Reason.UNKNOWN_OUTCOME if not spec.meta.readonly else Reason.UNAVAILABLE,
        TOOL_CRASHED,
        f"{spec.name} failed ({type(exc).__name__}).",
        "Try again shortly." if spec.meta.readonly else "The host is checking what happened.",
    )
