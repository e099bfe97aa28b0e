"""The tasks extension's fixtures (``io.modelcontextprotocol/tasks``, 2026-07-28): the suite's
reference tools (``greet``, ``slow_compute``, ``failing_job``, ``protocol_error_job``,
``confirm_delete``, ``multi_input``, ``test_tool_with_task``) and the store their tasks live in.

The store is this process's memory (the profile runs one process): a task is a coroutine on the
event loop, named by an unguessable id, its creator's only (another principal's id looks
unknown, as the product's do), kept for ``TTL_MS``. It is no part of the product's
tasks (``agentops.runtime.mcp_waits``, rows in the database): ``install`` wraps the product's
``tasks/get``, ``tasks/cancel`` and ``tasks/update`` so that the product answers first, with its
own gate (era, the declared extension, ``Mcp-Name``), and only an id it does not know is looked
up here; an id neither knows gets the product's own refusal.
"""

from __future__ import annotations

import asyncio
import enum
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from agentops.mcp.conformance._base import (
    NAME_REQUEST,
    Ctx,
    Era,
    ToolAnswer,
    accepted,
    declared_capabilities,
    elicit,
    needs_input,
    require,
    text_result,
    tool,
)

EXTENSION = "io.modelcontextprotocol/tasks"
TTL_MS = 300_000
POLL_INTERVAL_MS = 200
LONGEST_SLEEP = 120.0  # seconds: slow_compute sleeps what it is asked, up to this


class Status(enum.StrEnum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


# Every move a fixture task may make; anything else is a bug in this module (``move`` refuses).
MOVES: Mapping[Status, frozenset[Status]] = {
    Status.WORKING: frozenset(
        {Status.INPUT_REQUIRED, Status.COMPLETED, Status.FAILED, Status.CANCELLED}
    ),
    Status.INPUT_REQUIRED: frozenset({Status.WORKING, Status.FAILED, Status.CANCELLED}),
    Status.COMPLETED: frozenset(),
    Status.FAILED: frozenset(),
    Status.CANCELLED: frozenset(),
}


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class FixtureTask:
    task_id: str
    owner: str | None = None  # the authenticated principal that created it
    created_at: datetime = field(default_factory=_now)
    last_updated_at: datetime = field(default_factory=_now)
    status: Status = Status.WORKING
    result: types.CallToolResult | None = None
    error: types.ErrorData | None = None
    # What the task waits for (key -> request) and what the client has answered so far.
    input_requests: dict[str, types.InputRequest] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None

    @property
    def terminal(self) -> bool:
        return not MOVES[self.status]

    def wire(self, *, detailed: bool) -> dict[str, Any]:
        """The task as the extension puts it on the wire: a CreateTaskResult carries only the
        basics; ``tasks/get`` (``detailed``) adds what waits, the result or the error."""
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status.value,
            "createdAt": self.created_at.isoformat(),
            "lastUpdatedAt": self.last_updated_at.isoformat(),
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if not detailed:
            return task
        if self.input_requests:
            task["inputRequests"] = {
                key: request.model_dump(by_alias=True, mode="json", exclude_none=True)
                for key, request in self.input_requests.items()
            }
        if self.result is not None:
            task["result"] = self.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        if self.error is not None:
            task["error"] = self.error.model_dump(by_alias=True, mode="json", exclude_none=True)
        return task

    async def ask(self, requests: Mapping[str, types.InputRequest]) -> dict[str, Any]:
        """Wait in ``input_required`` until the client has answered every request (through
        ``tasks/update``, in one update or several); return the answers by key."""
        keyed = {f"{name}-{secrets.token_hex(4)}": request for name, request in requests.items()}
        self.answers, self.input_requests = {}, dict(keyed)
        self.answered.clear()
        move(self, Status.INPUT_REQUIRED)
        await self.answered.wait()
        return {name: self.answers[key] for name, key in zip(requests, keyed, strict=True)}

    def answer(self, responses: Mapping[str, Any]) -> None:
        """Take the answers to outstanding requests; a key that is not outstanding is ignored,
        as the extension says."""
        for key, response in responses.items():
            if key in self.input_requests:
                del self.input_requests[key]
                self.answers[key] = response
        self.last_updated_at = _now()
        if self.status == Status.INPUT_REQUIRED and not self.input_requests:
            move(self, Status.WORKING)
            self.answered.set()


def move(task: FixtureTask, status: Status) -> None:
    """The one place a fixture task changes status."""
    if status not in MOVES[task.status]:
        raise RuntimeError(f"a fixture task cannot move from {task.status} to {status}")
    task.status, task.last_updated_at = status, _now()


TaskBody = Callable[[FixtureTask], Awaitable[types.CallToolResult]]


class TaskStore:
    """The fixture tasks of this process, each for ``TTL_MS`` after it was created."""

    def __init__(self) -> None:
        self._tasks: dict[str, FixtureTask] = {}

    def start(self, body: TaskBody, *, owner: str | None) -> FixtureTask:
        """Create the task (readable at once, before its answer leaves) and run ``body`` on the
        event loop; what it returns or raises settles the task."""
        self._expire()
        task = FixtureTask(task_id=secrets.token_urlsafe(24), owner=owner)
        self._tasks[task.task_id] = task
        task.runner = asyncio.get_running_loop().create_task(self._run(task, body))
        return task

    def get(self, task_id: str, *, owner: str | None) -> FixtureTask | None:
        """The owner's task; another principal's looks exactly like an unknown one."""
        self._expire()
        task = self._tasks.get(task_id)
        return task if task is not None and task.owner == owner else None

    def cancel(self, task: FixtureTask) -> None:
        """Cancelled at once, as the next ``tasks/get`` shows; a terminal task stays as it is."""
        if task.terminal:
            return
        move(task, Status.CANCELLED)
        task.input_requests = {}
        if task.runner is not None:
            task.runner.cancel()

    async def _run(self, task: FixtureTask, body: TaskBody) -> None:
        try:
            result = await body(task)
        except asyncio.CancelledError:
            if not task.terminal:  # expired, or the loop is closing
                move(task, Status.CANCELLED)
            return
        except MCPError as failure:
            task.error = failure.error
        except Exception as failure:  # any crash is the task's protocol error
            task.error = types.ErrorData(code=types.INTERNAL_ERROR, message=str(failure))
        else:
            if not task.terminal:
                task.result = result
                move(task, Status.COMPLETED)
            return
        if not task.terminal:
            task.input_requests = {}
            move(task, Status.FAILED)

    def _expire(self) -> None:
        oldest = _now() - timedelta(milliseconds=TTL_MS)
        for task_id in [k for k, t in self._tasks.items() if t.created_at < oldest]:
            task = self._tasks.pop(task_id)
            if task.runner is not None:
                task.runner.cancel()


STORE = TaskStore()


def _owner(ctx: Ctx) -> str | None:
    """The principal the endpoint authenticated (``scope["user"]``), as the product binds its
    own tasks to the subject."""
    user = ctx.request.scope.get("user") if ctx.request is not None else None
    return getattr(user, "username", None)


def _declares_tasks(ctx: Ctx) -> bool:
    return EXTENSION in (declared_capabilities(ctx).extensions or {})


def _require_tasks(ctx: Ctx) -> None:
    """A tool whose task support is ``required`` cannot answer a client without the extension
    (-32021, naming the extension, as the extension asks)."""
    if not _declares_tasks(ctx):
        data = types.MissingRequiredClientCapabilityErrorData(
            required_capabilities=types.ClientCapabilities(extensions={EXTENSION: {}})
        )
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Client did not declare: {EXTENSION}",
            data.model_dump(by_alias=True, mode="json", exclude_none=True),
        )


def _created(ctx: Ctx, body: TaskBody) -> dict[str, Any]:
    return {"resultType": "task", **STORE.start(body, owner=_owner(ctx)).wire(detailed=False)}


def _elicited(answer: Any) -> dict[str, Any] | None:
    """The content of an accepted elicitation answer as ``tasks/update`` carried it, else None."""
    try:
        result = types.ElicitResult.model_validate(answer)
    except ValidationError:
        return None
    return result.content or {} if result.action == "accept" else None


# --- tools ---------------------------------------------------------------------------------------


def _schema(**properties: str) -> dict[str, Any]:
    return {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}


@tool("greet", "Greets at once (never a task).", schema=_schema(name="string"))
async def greet(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return text_result(f"Hello, {(params.arguments or {}).get('name', 'World')}!")


@tool(
    "slow_compute",
    "Sleeps `seconds`, then answers; a task for a client with the tasks extension.",
    schema=_schema(seconds="number", label="string"),
    era=Era.MODERN,
    task_support="optional",
)
async def slow_compute(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    arguments = params.arguments or {}
    try:
        seconds = min(max(float(arguments.get("seconds", 0)), 0.0), LONGEST_SLEEP)
    except (TypeError, ValueError):
        return text_result("seconds must be a number", is_error=True)
    label = str(arguments.get("label", ""))

    async def compute(task: FixtureTask | None = None) -> types.CallToolResult:
        await asyncio.sleep(seconds)
        return text_result(f"Computed {label or 'it'} in {seconds:g}s.")

    return _created(ctx, compute) if _declares_tasks(ctx) else await compute()


@tool(
    "failing_job",
    "A task that reports a tool error after about a second.",
    era=Era.MODERN,
    task_support="required",
)
async def failing_job(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    _require_tasks(ctx)

    async def fail(task: FixtureTask) -> types.CallToolResult:
        await asyncio.sleep(1)
        return text_result("The job failed, as it always does.", is_error=True)

    return _created(ctx, fail)


@tool(
    "protocol_error_job",
    "A task that ends in a protocol error (status failed).",
    era=Era.MODERN,
    task_support="required",
)
async def protocol_error_job(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    _require_tasks(ctx)

    async def crash(task: FixtureTask) -> types.CallToolResult:
        await asyncio.sleep(0.2)
        raise MCPError(types.INTERNAL_ERROR, "The job broke down (a protocol-level error).")

    return _created(ctx, crash)


@tool(
    "confirm_delete",
    "A task that asks the client to confirm deleting `filename`.",
    schema=_schema(filename="string"),
    era=Era.MODERN,
    task_support="required",
)
async def confirm_delete(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    _require_tasks(ctx)
    filename = str((params.arguments or {}).get("filename", "the file"))

    async def confirm(task: FixtureTask) -> types.CallToolResult:
        ask = elicit(f"Delete {filename}?", {"confirm": {"type": "boolean"}})
        answer = _elicited((await task.ask({"confirm": ask}))["confirm"])
        if answer is not None and answer.get("confirm") is True:
            return text_result(f"Deleted {filename}.")
        return text_result(f"Kept {filename}.")

    return _created(ctx, confirm)


@tool(
    "multi_input",
    "A task that asks two questions at once.",
    era=Era.MODERN,
    task_support="required",
)
async def multi_input(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    _require_tasks(ctx)

    async def both(task: FixtureTask) -> types.CallToolResult:
        answers = await task.ask(
            {
                "name": NAME_REQUEST,
                "confirm": elicit("Go ahead?", {"confirm": {"type": "boolean"}}),
            }
        )
        name, confirm = (_elicited(answers[key]) or {} for key in ("name", "confirm"))
        return text_result(f"name={name.get('name')}, confirm={confirm.get('confirm')}")

    return _created(ctx, both)


@tool(
    "test_tool_with_task",
    "Asks for a name (input_required), then greets in a task.",
    era=Era.MODERN,
    task_support="required",
)
async def tool_with_task(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    _require_tasks(ctx)
    require(ctx, elicitation={})
    answer = accepted(params, "user_name")
    if answer is None or "name" not in answer:
        return needs_input({"user_name": NAME_REQUEST})
    name = str(answer["name"])

    async def greet_later(task: FixtureTask) -> types.CallToolResult:
        await asyncio.sleep(0.2)
        return text_result(f"Hello, {name}!")

    return _created(ctx, greet_later)


# --- tasks/get, tasks/cancel, tasks/update -------------------------------------------------------


def _is_unknown_task(error: MCPError) -> bool:
    data = error.error.data
    return (
        error.error.code == types.INVALID_PARAMS
        and isinstance(data, dict)
        and data.get("reason") == "task_not_found"
    )


# Each takes the params the product's handler validated (its model: ``taskId`` and, for
# tasks/update, ``inputResponses``).
FixtureAnswer = Callable[[FixtureTask, Any], dict[str, Any]]


def _get(task: FixtureTask, params: Any) -> dict[str, Any]:
    return task.wire(detailed=True)


def _cancel(task: FixtureTask, params: Any) -> dict[str, Any]:
    STORE.cancel(task)
    return {}


def _update(task: FixtureTask, params: Any) -> dict[str, Any]:
    task.answer(getattr(params, "input_responses", None) or {})
    return {}


FIXTURE_ANSWERS: Mapping[str, FixtureAnswer] = {
    "tasks/get": _get,
    "tasks/cancel": _cancel,
    "tasks/update": _update,
}


def install(server: Server) -> None:
    """Put the fixture store behind the product's tasks/* handlers."""
    for method, answer in FIXTURE_ANSWERS.items():
        entry = server.get_request_handler(method)
        if entry is None:
            raise RuntimeError(f"install the task fixtures after the product's {method}")
        server.add_request_handler(method, entry.params_type, _behind(entry.handler, answer))


def _behind(
    product: Callable[[Ctx, Any], Awaitable[Any]], answer: FixtureAnswer
) -> Callable[[Ctx, Any], Awaitable[Any]]:
    """The product answers first, gate included; only a task it does not know is looked up
    in the fixture store, and one neither knows gets the product's refusal unchanged."""

    async def handle(ctx: Ctx, params: Any) -> Any:
        try:
            return await product(ctx, params)
        except MCPError as refused:
            unknown = _is_unknown_task(refused)
            task = STORE.get(params.task_id, owner=_owner(ctx)) if unknown else None
            if task is None:
                raise
        return answer(task, params)

    return handle
