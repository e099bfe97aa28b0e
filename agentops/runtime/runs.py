"""The run life cycle: start, advance, settle, cancel (a step: runtime.steps).

Each function takes ids, locks what it changes (runtime.locks), changes status only through
runtime.transitions, and is safe to call twice (Celery delivers at least once).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone, translation
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from accounts.typed import TypedField, typed_text
from accounts.words import say
from agentops.contract import (
    ConversationTurn,
    Delegation,
    Reason,
    ReplyKind,
    ScopeError,
    ToolError,
    canonical_json,
)
from agentops.models import (
    ROLLBACK_RUN_STATUSES,
    UNSETTLED_ACTION_STATUSES,
    WRITE_COUNTING_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    EventKind,
    RunKind,
    RunOutcome,
    RunStatus,
    TraceEvent,
)
from agentops.runtime import approval, ratelimit, registry
from agentops.runtime.kinds import POLICY_VERSION, AfterCall, rules, run_create
from agentops.runtime.locks import lock_action, lock_run
from agentops.runtime.queue import (
    continue_action,
    continue_step,
    enqueue_action,
    enqueue_reconcile,
    enqueue_step,
)
from agentops.runtime.saga import run_end, saga_advance
from agentops.runtime.store import run_actions
from agentops.runtime.timing import DEFAULT_BUDGETS, Budgets
from agentops.runtime.trace import trace_append
from agentops.runtime.transitions import action_move, run_move
from agentops.runtime.verifier import call_verify
from approvals.models import RequestStatus
from approvals.selectors import approval_request_latest

log = logging.getLogger(__name__)

MAX_REQUEST_CHARS = 2000
MAX_CONVERSATION_TURNS = 10  # earlier turns a run is read with


class RunRequestError(ValueError):
    """The request text or scope cannot start a run (the caller's input, never a fault)."""


class RunRateLimited(Exception):  # noqa: N818 -- a refusal, not a failure
    """``reply`` words the refusal for the person, in the language of their request."""

    def __init__(self, retry_after_ms: int, *, reply: str = "", language: str = "en") -> None:
        super().__init__("too many runs started this minute")
        self.retry_after_ms = retry_after_ms
        self.reply = reply or str(self)
        self.language = language

    @property
    def retry_after_s(self) -> int:
        return max(1, -(-self.retry_after_ms // 1000))


class RunKeyReused(Exception):  # noqa: N818 -- a refusal, not a failure
    """The idempotency key already started a run for another request."""

    def __init__(self, run: AgentRun) -> None:
        super().__init__("this idempotency key already started a run for another request")
        self.run = run


class ScopeIn(BaseModel):
    """An explicit scope (API, tests). It can only narrow what the request grants."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tools: list[str] | None = Field(default=None, max_length=50)
    window: tuple[AwareDatetime, AwareDatetime] | None = None
    attendees: int | None = Field(default=None, ge=1, le=500)
    equipment: list[str] = Field(default_factory=list, max_length=10)
    resource: str | None = Field(default=None, max_length=64)
    max_writes: int | None = Field(default=None, ge=0, le=5)


def _narrowed(delegation: Delegation, scope: dict[str, Any]) -> Delegation:
    try:
        given = ScopeIn.model_validate_json(canonical_json(scope))
        return delegation.narrow(
            tools=frozenset(given.tools) if given.tools is not None else None,
            max_writes=given.max_writes,
            window=given.window,
            attendees=given.attendees,
            equipment=frozenset(given.equipment),
            resource=given.resource,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'scope'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise RunRequestError(f"invalid scope: {problems}") from None
    except ScopeError as exc:
        raise RunRequestError(f"invalid scope: {exc}") from None


# --- start and cancel -------------------------------------------------------------------------


def run_start(
    *,
    user: Any,
    request_text: str,
    scope: dict[str, Any] | None = None,
    model: str | None = None,
    faults: list[dict[str, Any]] | None = None,
    script: list[dict[str, Any]] | None = None,
    budgets: Budgets | dict[str, int] = DEFAULT_BUDGETS,
    idempotency_key: str | None = None,
    conversation_id: uuid.UUID | None = None,
) -> AgentRun:
    """Create a run for ``user`` (from the session or token) and enqueue its first step.

    With ``idempotency_key``, the user's run started under that key for the same request and
    scope is returned instead (``replayed`` set, nothing counted or written); the key under
    another request raises RunKeyReused. Raises RunRequestError (a ValueError) for a request or scope that cannot
    start a run, RunRateLimited when the user started too many runs this minute (counted before
    anything is read or written)."""
    if isinstance(budgets, dict):  # tests and drills override single budgets
        budgets = Budgets.from_json(DEFAULT_BUDGETS.to_json() | budgets)
    if isinstance(request_text, str):  # what is kept, shown back and read: typed text's rule
        request_text = typed_text(request_text, TypedField.REQUEST)
    given_conversation = str(conversation_id) if conversation_id else None
    digest = hashlib.sha256(
        canonical_json(
            {
                "request": (request_text or "").strip(),
                "scope": scope,
                **({"conversation": given_conversation} if given_conversation else {}),
            }
        ).encode()
    ).hexdigest()
    if idempotency_key and (earlier := _run_under_key(user, idempotency_key, digest)):
        return earlier
    retry_after_ms = ratelimit.run_starts.hit(user.pk)
    if retry_after_ms is not None:
        assistant = registry.assistant()
        language = assistant.language_of((request_text or "")[:MAX_REQUEST_CHARS])
        refused = RunRateLimited(retry_after_ms, language=language)
        refused.reply = assistant.reply(
            ReplyKind.RATE_LIMITED, language=language, detail=str(refused.retry_after_s)
        )
        raise refused
    text = (request_text or "").strip()
    if not text or len(text) > MAX_REQUEST_CHARS or "\x00" in text:
        raise RunRequestError(f"request must be 1-{MAX_REQUEST_CHARS} characters of text")
    earlier = conversation_turns(user=user, conversation_id=conversation_id)
    reading = registry.assistant().read_request(
        text, now=timezone.now(), conversation=earlier, subject=user
    )
    delegation = reading.delegation
    if scope is not None:
        delegation = _narrowed(delegation, scope)
    # The run and its first event are one statement (run_create with ``started``); its first
    # step is sent once that has committed. One statement needs no transaction around it (a
    # BEGIN and a COMMIT are two round trips more); inside the caller's, a savepoint keeps a
    # key's race (the IntegrityError below) from breaking it.
    model_name = model or settings.AGENT_MODEL
    try:
        with (
            transaction.atomic() if transaction.get_connection().in_atomic_block else nullcontext()
        ):
            run = run_create(
                kind=RunKind.ASSISTANT,
                subject=user,
                goal=text,
                model_name=model_name,
                delegation=delegation,
                budgets=budgets,
                started={
                    "subject": getattr(user, "employee_id", "") or user.pk,
                    "model": model_name,
                    "understood": reading.understood,
                    "delegation": delegation.to_json(),
                    "budgets": budgets.to_json(),
                    "policy_version": POLICY_VERSION,
                    "conversation_turn": len(earlier) + 1,
                },
                idempotency_key=idempotency_key or "",
                conversation_id=conversation_id or uuid.uuid4(),
                conversation=[turn.to_json() for turn in earlier],
                request_digest=digest,
                language=reading.language,
                faults=faults or [],
                model_script=script or [],
            )
            enqueue_step(run.pk, 1)
    except IntegrityError:  # a concurrent start under the same key committed first
        earlier = _run_under_key(user, idempotency_key, digest) if idempotency_key else None
        if earlier is None:
            raise
        return earlier
    return run


def conversation_turns(*, user: Any, conversation_id: uuid.UUID | None) -> list[ConversationTurn]:
    """The user's earlier turns of this conversation, oldest first, the last
    ``MAX_CONVERSATION_TURNS`` of them: what each asked, what the assistant answered, what was
    understood. Someone else's conversation has no turns for this user."""
    if conversation_id is None:
        return []
    runs = (
        AgentRun.objects.filter(
            subject=user, conversation_id=conversation_id, kind=RunKind.ASSISTANT
        )
        .annotate(
            understood=Subquery(
                TraceEvent.objects.filter(run=OuterRef("pk"), seq=1).values("payload")[:1]
            )
        )
        .order_by("-created_at")[:MAX_CONVERSATION_TURNS]
    )
    return [
        ConversationTurn(
            request=run.goal,
            reply=run.reply,
            understood=dict((run.understood or {}).get("understood") or {}),
            outcome=run.status,
        )
        for run in reversed(list(runs))
    ]


def _run_under_key(user: Any, key: str, digest: str) -> AgentRun | None:
    earlier = AgentRun.objects.filter(subject=user, idempotency_key=key).first()
    if earlier is None:
        return None
    if earlier.request_digest != digest:
        raise RunKeyReused(earlier)
    earlier.replayed = True
    return earlier


def run_cancel(*, run_id: Any, user: Any) -> AgentRun:
    """Cancel the user's run. Calls that have not started never will; a write in flight is
    waited for, and the writes the run confirmed are released (runtime.saga): the reply says
    what became of them, from the verified state."""
    with transaction.atomic():
        run = AgentRun.objects.select_for_update().get(pk=run_id, subject=user)
        if not run.is_terminal and run.status not in ROLLBACK_RUN_STATUSES:
            reply = registry.assistant().reply(ReplyKind.CANCELLED, language=run.language)
            run_end(run, RunStatus.CANCELLED, outcome=RunOutcome.CANCELLED_BY_USER, reply=reply)
    return run


# --- the write allowance ----------------------------------------------------------------------


def writes_used(run: AgentRun, actions: list[Action] | None = None) -> int:
    """Writes that used the run's allowance. A refused or failed write wrote nothing; a
    compensation is the host's undo, not a write of the request. ``actions``: the run's
    actions if the caller has read them already (under the run lock)."""
    return sum(
        1
        for a in (run_actions(run) if actions is None else actions)
        if not a.readonly and a.status in WRITE_COUNTING_STATUSES and a.compensates_id is None
    )


# --- moving on --------------------------------------------------------------------------------


def advance(run_id: Any, turn: int) -> None:
    with transaction.atomic():
        advance_locked(lock_run(run_id), turn)


def advance_locked(
    run: AgentRun,
    turn: int,
    *,
    turn_actions: list[Action] | None = None,
    run_actions_now: list[Action] | None = None,
) -> None:
    """After a turn's actions change: start the next calls (reads in parallel, writes one at a
    time), or the next step when all are done. The caller holds the run lock (and passes the
    turn's actions when it has just loaded or made them all; ``run_actions_now``: all the
    run's, read under that lock, which a call started here is prechecked against)."""
    if run.status != RunStatus.RUNNING:
        return
    if turn_actions is None and run_actions_now is not None:
        turn_actions = [a for a in run_actions_now if a.turn == turn]
    actions = turn_actions if turn_actions is not None else run_actions(run, turn=turn)
    if any(a.status == ActionStatus.RUNNING for a in actions):
        return
    queued = [a for a in actions if a.status == ActionStatus.QUEUED]
    if not queued:
        next_step(run, turn + 1, actions=run_actions_now)
        return
    reads = [a for a in queued if a.readonly]
    to_start = [a for a in reads or queued[:1] if not a.task_id]
    if len(to_start) == 1:  # nothing to run beside it
        start_here(run, to_start[0], actions=run_actions_now)
        return
    for action in to_start:
        action.task_id = "enqueued"
        action.save(update_fields=["task_id"])
        enqueue_action(action.pk, run_id=run.pk)


# How the next step is planned in its caller's transaction: agentops.runtime.steps installs it
# as it is imported (it imports this module). A caller that can take the step's failure turns it
# on for its own work (steps_here): a call's end, which records the outcome again without the
# step if the step's statements fail (recorder.action_finish).
_STEPPERS: list[Callable[[AgentRun, int, list[Action] | None], bool]] = []
_STEP_HERE: ContextVar[bool] = ContextVar("agentops_step_here", default=False)


class StepHereError(Exception):
    """The next step, planned in its caller's transaction, failed on a statement (its cause):
    that transaction is lost, and the caller does its own work again without the step."""


def install_stepper(step: Callable[[AgentRun, int, list[Action] | None], bool]) -> None:
    _STEPPERS[:] = [step]


@contextmanager
def steps_here(on: bool = True) -> Iterator[None]:
    """Within: next_step plans the next step in the caller's transaction when it can, and may
    raise StepHereError (``on=False``: it never does, whatever an outer block says)."""
    token = _STEP_HERE.set(on)
    try:
        yield
    finally:
        _STEP_HERE.reset(token)


def next_step(run: AgentRun, turn: int, *, actions: list[Action] | None = None) -> None:
    """Turn ``turn`` of the run (locked by the caller) is next. Within steps_here, the step is
    planned in the caller's transaction, as a turn's claim would plan it (a local planner, the
    run running within its budgets, no call open, the subject's roles read with the run's
    lock): the call's end, the turn's claim and the step commit together, with one transaction
    where there were two. Otherwise, or when the step cannot be taken so, it is sent on to be
    claimed after the caller's commit, as before."""
    if _STEP_HERE.get() and _STEPPERS and _STEPPERS[0](run, turn, actions):
        return
    continue_step(run.pk, turn)


# How a queued call starts in its caller's transaction: agentops.runtime.recorder installs it
# as it is imported (it imports this module, so this one cannot import it).
_STARTERS: list[Callable[[AgentRun, Action, list[Action] | None], None]] = []


def install_starter(start: Callable[[AgentRun, Action, list[Action] | None], None]) -> None:
    _STARTERS[:] = [start]


def start_here(run: AgentRun, action: Action, *, actions: list[Action] | None = None) -> None:
    """Start the queued ``action`` in the caller's transaction (which holds the run lock); this
    process makes the call after the commit, as a step's one call is made. Neither a second
    lock of the run nor a mark for the sweeper: a running action has a lease, and a process
    that dies before the call leaves it for the sweeper to settle. ``actions``: the run's, if
    the caller read them under its lock. Without the recorder installed, the call is marked
    and continued after the commit, in a transaction of its own."""
    if _STARTERS:
        _STARTERS[0](run, action, actions)
        return
    action.task_id = "enqueued"
    action.save(update_fields=["task_id"])
    continue_action(action.pk, run_id=run.pk)


def action_settled(run: AgentRun, action: Action, *, alone: bool = False) -> None:
    """An action has finished an attempt (or was refused right before it): continue the run.
    The caller holds the run lock and has moved the action already. ``alone``: it was proposed
    as the only call of its turn (a step's proposals are all made at once, and only a rollback,
    which never runs again, adds calls to a turn), so the turn's actions are this one."""
    if run.status in ROLLBACK_RUN_STATUSES or action.compensates_id is not None:
        if action.status == ActionStatus.UNKNOWN_OUTCOME:
            enqueue_reconcile(action.pk)  # a rollback waits for what really happened
        elif action.status != ActionStatus.QUEUED:  # else a retry is scheduled
            saga_advance(run)
        return
    if action.status == ActionStatus.UNKNOWN_OUTCOME:
        if run.status == RunStatus.RUNNING:
            run_move(run, RunStatus.RECONCILING, payload={"key": action.idempotency_key})
        enqueue_reconcile(action.pk)
        return
    if action.status == ActionStatus.QUEUED:  # a retry is scheduled
        return
    if rules(run).verify_each_call:
        action.verification = call_verify(run, action)
    if run.status == RunStatus.RECONCILING:
        resume_if_clear(run, action)
    else:
        _after_call(run, action, turn_actions=[action] if alone else None)


def _after_call(
    run: AgentRun,
    action: Action,
    *,
    outcome: RunOutcome | None = None,
    turn_actions: list[Action] | None = None,
    run_actions_now: list[Action] | None = None,
) -> None:
    """What a settled call leads to, by the run's kind (``kinds.KINDS``, ``after_call``)."""
    match rules(run).after_call:
        case AfterCall.NEXT_STEP:
            advance_locked(
                run, action.turn, turn_actions=turn_actions, run_actions_now=run_actions_now
            )
        case AfterCall.END_RUN:
            _end_with_call(run, action, outcome=outcome)
        case AfterCall.CLIENT_NEXT:
            pass  # an MCP session goes on: its client sends the next call


def resume_if_clear(run: AgentRun, action: Action) -> None:
    """A reconciliation has settled ``action``: resume the run when nothing else is unsettled."""
    if run.actions.filter(status__in=UNSETTLED_ACTION_STATUSES).exists():
        return
    if action.status in (ActionStatus.QUEUED, ActionStatus.RUNNING):
        return  # a reconciliation retry is on its way
    if rules(run).after_call == AfterCall.END_RUN:
        _after_call(run, action, outcome=RunOutcome.RECONCILED)
        return
    if run.status == RunStatus.RECONCILING:
        run_move(run, RunStatus.RUNNING, payload={"turn": action.turn})
    _after_call(run, action)


def _end_with_call(run: AgentRun, action: Action, outcome: RunOutcome | None = None) -> None:
    """A run of one call ends with it: succeeded only when the call did and its receipt was
    verified to hold (``action.verification``, set as it settled)."""
    if run.is_terminal:
        return
    ok = action.status == ActionStatus.SUCCEEDED
    verification = getattr(action, "verification", None)
    if ok and verification is not None and not verification.holds:
        run_move(run, RunStatus.FAILED, outcome=RunOutcome.VERIFICATION_FAILED, reply="")
        return
    if outcome is None:
        outcome = (
            RunOutcome.CALL_SUCCEEDED
            if ok
            else RunOutcome.REFUSED
            if action.status == ActionStatus.REJECTED
            else RunOutcome.CALL_FAILED
        )
    run_move(run, RunStatus.SUCCEEDED if ok else RunStatus.FAILED, outcome=outcome, reply="")


def _lock_waiting(action_id: Any, *, run_id: Any = None) -> tuple[AgentRun, Action] | None:
    """The run and action, locked, if the action still waits for an approval in a live run."""
    locked = lock_action(action_id, run_id=run_id)
    if locked is None and run_id is not None:  # not of that run after all: look it up
        locked = lock_action(action_id)
    if locked is None:
        return None
    run, action = locked
    if action.status != ActionStatus.WAITING_APPROVAL or run.is_terminal:
        return None
    return run, action


# The decisions that move the waiting action of a run the approval holds (their event is saved
# with that move).
_MOVED_BY_DECISION = frozenset(
    {
        RequestStatus.APPROVED,
        RequestStatus.REJECTED,
        RequestStatus.EXPIRED,
        RequestStatus.OVERTAKEN,
    }
)


def action_approval_settled(action_id: Any, *, run_id: Any = None) -> None:
    """A human decided (or nobody did in time): the waiting action runs, is refused, or the run
    ends. Safe to call twice. ``run_id``: the request's run, if known (spares a look-up; one
    that is not the action's costs the look-up after all)."""
    request = approval_request_latest(action_ref=str(action_id))
    if request is None:
        return
    with transaction.atomic():
        locked = _lock_waiting(action_id, run_id=run_id)
        if locked is None:
            return
        run, action = locked
        record = getattr(request, "record", None)
        decided = {
            "request": str(request.pk),
            "status": request.status,
            "approver": record.approver.get_username() if record else None,
            "reason": record.reason if record else "",
            "key_id": record.key_id if record else None,
        }
        # The decision's event is saved by the action's move (one statement), else alone.
        moved: dict[str, Any] = {
            "event": EventKind.APPROVAL_DECIDED,
            "payload": decided,
            "run": run,
        }
        holds = rules(run).approval_holds_run
        if not holds or request.status not in _MOVED_BY_DECISION:
            trace_append(run=run, kind=EventKind.APPROVAL_DECIDED, action=action, payload=decided)
        if not holds:  # a session: only this call is decided
            _call_approval_settled(run, action, request.status, record)
            return
        if request.status == RequestStatus.APPROVED:
            action_move(action, ActionStatus.QUEUED, **moved)
        elif request.status == RequestStatus.REJECTED:
            refusal = ToolError(
                Reason.FORBIDDEN,
                "approval_rejected",
                f"An approver rejected this call: {record.reason}",
                "Tell the user why; do not propose the same call again.",
            )
            action_move(action, ActionStatus.REJECTED, result=refusal.envelope(), **moved)
        elif request.status == RequestStatus.EXPIRED:
            refusal = ToolError(
                Reason.EXPIRED,
                "approval_expired",
                "Nobody approved this call before its deadline.",
                "Nothing was done.",
            )
            action_move(action, ActionStatus.REJECTED, result=refusal.envelope(), **moved)
            spec = registry.get(action.tool)
            field = spec.scope.resource if spec is not None else None
            what = str(action.params.get(field) if field else action.tool)
            reply = registry.assistant().reply(
                ReplyKind.APPROVAL_EXPIRED, language=run.language, detail=what
            )
            run_end(run, RunStatus.FAILED, outcome=RunOutcome.APPROVAL_EXPIRED, reply=reply)
            return
        elif request.status == RequestStatus.OVERTAKEN:  # it can no longer run as asked
            why = _overtaken_words(action, language=run.language)
            refusal = ToolError(
                Reason.CONFLICT,
                "no_longer_possible",
                f"This call can no longer run as asked: {why}",
                "Nothing was done; search again for what is free now.",
            )
            action_move(action, ActionStatus.REJECTED, result=refusal.envelope(), **moved)
            reply = registry.assistant().reply(
                ReplyKind.NOTHING_DONE, language=run.language, detail=why
            )
            run_end(run, RunStatus.FAILED, outcome=RunOutcome.NOT_DONE, reply=reply)
            return
        elif request.status == RequestStatus.WITHDRAWN:  # the requester took it back
            reply = registry.assistant().reply(ReplyKind.CANCELLED, language=run.language)
            run_end(run, RunStatus.CANCELLED, outcome=RunOutcome.CANCELLED_BY_USER, reply=reply)
            return
        else:
            return
        if run.status != RunStatus.WAITING_APPROVAL:
            return
        # The run's actions, read once under the lock (this one as just moved): whether another
        # still waits, the turn's next call, and that call's precheck.
        actions = [action if a.pk == action.pk else a for a in run_actions(run)]
        if not any(a.status == ActionStatus.WAITING_APPROVAL for a in actions):
            run_move(run, RunStatus.RUNNING, payload={"turn": action.turn})
            if action.status == ActionStatus.QUEUED and rules(run).after_call == AfterCall.END_RUN:
                start_here(run, action, actions=actions)  # no model: run the one call
            else:
                _after_call(run, action, run_actions_now=actions)


def _overtaken_words(action: Action, *, language: str) -> str:
    """What now stands in the way of a waiting action, in ``language`` (its tool's re-check)."""
    problems = approval.request_recheck(action_ref=str(action.pk), signed_binding={})
    with translation.override(language):
        return " ".join(say(p) for p in problems)


def _call_approval_settled(run: AgentRun, action: Action, status: str, record: Any) -> None:
    """In a run whose approvals hold only their call (an MCP session) a decision settles only
    that call: approved, it runs; rejected,
    expired or withdrawn, it is refused. The session's other calls are not affected."""
    if status == RequestStatus.APPROVED:
        action_move(action, ActionStatus.QUEUED)
        start_here(run, action)
    elif status in (
        RequestStatus.REJECTED,
        RequestStatus.EXPIRED,
        RequestStatus.WITHDRAWN,
        RequestStatus.OVERTAKEN,
    ):
        code, message = {
            RequestStatus.REJECTED: (
                "approval_rejected",
                f"An approver rejected this call: {record.reason if record else ''}",
            ),
            RequestStatus.EXPIRED: (
                "approval_expired",
                "Nobody approved this call before its deadline.",
            ),
            RequestStatus.WITHDRAWN: ("approval_withdrawn", "The request was withdrawn."),
            RequestStatus.OVERTAKEN: (
                "no_longer_possible",
                "This call can no longer run as asked: " + _overtaken_words(action, language="en"),
            ),
        }[status]
        reason = {
            RequestStatus.EXPIRED: Reason.EXPIRED,
            RequestStatus.OVERTAKEN: Reason.CONFLICT,
        }.get(RequestStatus(status), Reason.FORBIDDEN)
        refusal = ToolError(reason, code, message, "Nothing was done; do not retry it unchanged.")
        action_move(action, ActionStatus.REJECTED, result=refusal.envelope())


def action_approval_refresh(action_id: Any) -> None:
    """A frozen action gets a fresh approval request: the same intent, bound to the current
    state. Safe to call twice (the one pending request per action stays one)."""
    with transaction.atomic():
        locked = _lock_waiting(action_id)
        if locked is None:
            return
        run, action = locked
        spec = registry.get(action.tool)
        args = spec.input_model.model_validate_json(canonical_json(action.params))
        approval.request_open(run, action, spec, args)
