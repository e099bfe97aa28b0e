from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy


class RunStatus(models.TextChoices):
    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    RECONCILING = "reconciling"
    COMPENSATING = "compensating"  # ending: its confirmed writes are being undone (a saga)
    ROLLBACK_PENDING = "rollback_pending"  # an undo failed: a human finishes the rollback
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_RUN_STATUSES = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
# A run being rolled back (runtime.saga): only its compensations run; nothing else continues.
ROLLBACK_RUN_STATUSES = frozenset({RunStatus.COMPENSATING, RunStatus.ROLLBACK_PENDING})


class RunKind(models.TextChoices):
    ASSISTANT = "assistant"  # a model plans it, turn by turn
    DIRECT = "direct"  # one governed call made directly (JSON API, screens)
    MCP = "mcp"  # one MCP session: every tools/call of the session is an action of this run


class RunOutcome(models.TextChoices):
    """Why a run ended (or why it is waiting)."""

    VERIFIED = "verified"  # every write confirmed by the current environment
    ANSWERED = "answered"  # a read-only request answered
    CALL_SUCCEEDED = "call_succeeded"  # a direct call answered green
    RECONCILED = "reconciled"  # a direct call's unknown outcome was settled
    REFUSED = "refused"  # a direct call refused by the gate
    CALL_FAILED = "call_failed"  # a direct call that ran and failed
    NOT_DONE = "not_done"
    GAVE_UP = "gave_up"
    ASK_USER = "ask_user"
    VERIFICATION_FAILED = "verification_failed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    LOOP_DETECTED = "loop_detected"
    MODEL_UNAVAILABLE = "model_unavailable"
    CANCELLED_BY_USER = "cancelled_by_user"
    APPROVAL_EXPIRED = "approval_expired"
    ABANDONED = "abandoned"  # an operator abandoned a write whose outcome stayed unclear
    SESSION_ENDED = "session_ended"  # an MCP session closed with nothing left waiting


class AgentRun(models.Model):
    """One request of one employee to the assistant. Runtime state: resumable from these rows."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="agent_runs"
    )
    goal = models.TextField()
    language = models.CharField(max_length=8, default="en")
    kind = models.CharField(max_length=16, choices=RunKind.choices, default=RunKind.ASSISTANT)
    model_name = models.CharField(max_length=32)
    delegation = models.JSONField(default=dict, help_text="Set by the host, never by the model.")
    budgets = models.JSONField(default=dict)
    policy_version = models.CharField(max_length=32)
    faults = models.JSONField(
        default=list, blank=True, help_text="Fault injection for tests and drills."
    )
    model_script = models.JSONField(
        default=list, blank=True, help_text="Steps of the scripted model (tests)."
    )
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.RUNNING)
    outcome = models.CharField(max_length=40, choices=RunOutcome.choices, blank=True)
    reply = models.TextField(blank=True)
    turn = models.PositiveIntegerField(default=0)
    proposals = models.PositiveIntegerField(default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    event_seq = models.PositiveIntegerField(default=0)
    deadline = models.DateTimeField()
    channel_session = models.CharField(
        max_length=64, blank=True, help_text="The MCP session this run is (kind mcp)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A client's one-time key for starting this run (the assistant form, `Idempotency-Key` of
    # POST /api/runs): the same key and request give this run again, never a second one.
    idempotency_key = models.CharField(max_length=100, blank=True)
    request_digest = models.CharField(max_length=64, blank=True)
    # A person's assistant runs form conversations: a run starts one, or continues the one
    # named by the assistant page or `conversation_id` of POST /api/runs. The earlier turns it
    # was read with are copied here when it starts (personal text: blanked by retention).
    conversation_id = models.UUIDField(null=True, blank=True, db_index=True)
    conversation = models.JSONField(
        default=list, blank=True, help_text="Earlier turns of its conversation, as read at start."
    )
    replayed = False  # not stored: run_start sets it when a key gave back an existing run
    # Not stored either; agentops.runtime.store sets them. The subject's roles read with the
    # run's lock (run_action_locked), and columns set under that lock that the next save of
    # the run's columns writes (run_turn_take).
    roles_as_locked: frozenset[str] | None = None
    unsaved_fields: tuple[str, ...] = ()

    class Meta:
        verbose_name = gettext_lazy("run")
        verbose_name_plural = gettext_lazy("runs")
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["subject", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="run_idempotency_key_unique",
            ),
            models.CheckConstraint(
                condition=models.Q(finished_at__isnull=True)
                | models.Q(status__in=["succeeded", "failed", "cancelled"]),
                name="run_finished_only_when_terminal",
            ),
            models.UniqueConstraint(
                fields=["channel_session"],
                condition=~models.Q(channel_session=""),
                name="run_channel_session_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES


class ActionStatus(models.TextChoices):
    REJECTED = "rejected"  # refused by the gate; nothing executed
    WAITING_APPROVAL = "waiting_approval"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN_OUTCOME = "unknown_outcome"
    NEEDS_HUMAN = "needs_human"
    CANCELLED = "cancelled"


OPEN_ACTION_STATUSES = frozenset({ActionStatus.QUEUED, ActionStatus.RUNNING})
UNSETTLED_ACTION_STATUSES = frozenset({ActionStatus.UNKNOWN_OUTCOME, ActionStatus.NEEDS_HUMAN})
# A write in these statuses used (or may have used) the run's write allowance.
WRITE_COUNTING_STATUSES = frozenset(
    {
        ActionStatus.WAITING_APPROVAL,
        ActionStatus.QUEUED,
        ActionStatus.RUNNING,
        ActionStatus.SUCCEEDED,
        ActionStatus.UNKNOWN_OUTCOME,
        ActionStatus.NEEDS_HUMAN,
    }
)


class EventKind(models.TextChoices):
    """Every kind of trace event."""

    RUN_STARTED = "run_started"
    MODEL_STEP = "model_step"
    MODEL_ERROR = "model_error"
    GATE = "gate"
    PRECHECK_REFUSED = "precheck_refused"
    EXECUTION_STARTED = "execution_started"
    EXECUTION_FINISHED = "execution_finished"
    EXECUTION_SKIPPED = "execution_skipped"
    RETRY_SCHEDULED = "retry_scheduled"
    LEASE_EXPIRED = "lease_expired"
    RUN_WAITING_APPROVAL = "run_waiting_approval"
    RUN_RECONCILING = "run_reconciling"
    RECONCILE_LOOKUP = "reconcile_lookup"
    RECONCILE_RETRY = "reconcile_retry"
    RECONCILE_NEEDS_HUMAN = "reconcile_needs_human"
    RECONCILE_DECIDED = "reconcile_decided"  # an operator's decision from the queue
    RUN_RESUMED = "run_resumed"
    VERIFIED = "verified"
    BUDGET_EXHAUSTED = "budget_exhausted"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"
    APPROVAL_FROZEN = "approval_frozen"
    RUN_COMPENSATING = "run_compensating"
    COMPENSATION_PLANNED = "compensation_planned"
    RUN_ROLLBACK_PENDING = "run_rollback_pending"
    RUN_FINISHED = "run_finished"


class Action(models.Model):
    """A proposed tool call and everything the runtime did with it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: the unique (run, turn, call_index) index leads with the run.
    run = models.ForeignKey(
        AgentRun, on_delete=models.CASCADE, related_name="actions", db_index=False
    )
    turn = models.PositiveIntegerField()
    call_index = models.PositiveIntegerField()
    tool = models.CharField(max_length=64)
    params = models.JSONField(help_text="Validated arguments (or the raw ones, when refused).")
    params_digest = models.CharField(max_length=64)
    readonly = models.BooleanField(default=True)
    risk = models.CharField(max_length=8, blank=True)
    risk_reasons = models.JSONField(default=list, blank=True)
    observed_version = models.IntegerField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=200, blank=True)
    compensation = models.JSONField(
        default=dict,
        blank=True,
        help_text="The undo registered with this write before it ran: tool and key.",
    )
    compensates = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="compensations",
        help_text="The write this call undoes (a saga's compensation).",
    )
    status = models.CharField(max_length=20, choices=ActionStatus.choices)
    attempts = models.PositiveSmallIntegerField(default=0)
    result = models.JSONField(
        null=True, blank=True, help_text="The envelope returned to the model."
    )
    proposal_deadline = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    # Not stored: set as a write of a run without a model settles (runtime.verifier.call_verify);
    # the verified trace event is the record.
    verification = None

    class Meta:
        verbose_name = gettext_lazy("tool call")
        verbose_name_plural = gettext_lazy("tool calls")
        ordering = ["turn", "call_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "turn", "call_index"], name="action_position_unique"
            ),
        ]
        # Not unique: a replayed API call is recorded as its own action under the same key;
        # the idempotency table holds the one record per key.
        indexes = [
            models.Index(
                fields=["lease_expires_at"],
                condition=models.Q(status="running"),
                name="action_running_lease",
            ),
            models.Index(
                fields=["idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="action_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.status})"


class TraceEvent(models.Model):
    """Every gate decision, proposal, execution, reconciliation and reply of a run, in order."""

    # No index of its own: the unique (run, seq) index leads with the run.
    run = models.ForeignKey(
        AgentRun, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=40, choices=EventKind.choices)
    # No index of its own: events are read per run, in order (the unique (run, seq) index).
    action = models.ForeignKey(
        Action,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
    )
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = gettext_lazy("trace event")
        verbose_name_plural = gettext_lazy("trace events")
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="trace_seq_unique")]

    def __str__(self) -> str:
        return f"{self.seq} {self.kind}"


class IdempotencyStatus(models.TextChoices):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class IdempotencyRecord(models.Model):
    """A write's key: replays the finished response, refuses other parameters under the same key."""

    key = models.CharField(max_length=255, unique=True)
    tool = models.CharField(max_length=64)
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    request_digest = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=IdempotencyStatus.choices)
    response = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()

    class Meta:
        verbose_name = gettext_lazy("idempotency record")
        verbose_name_plural = gettext_lazy("idempotency records")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status="in_progress") | models.Q(response__isnull=False),
                name="idempotency_completed_has_response",
            ),
        ]

    def __str__(self) -> str:
        return self.key


class McpHandleKind(models.TextChoices):
    STATE = "state"  # the single-use nonce inside a sealed requestState
    TASK = "task"  # a task id (the Tasks extension)


class McpHandle(models.Model):
    """What a 2026-07-28 MCP client holds while one of its calls waits for an approver: the
    nonce of a requestState (used once) or a task id. Bound to the subject and the action, and
    kept here so that any web process answers the client's next request."""

    digest = models.CharField(max_length=64, primary_key=True)  # sha256 of the opaque value
    kind = models.CharField(max_length=8, choices=McpHandleKind.choices)
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    action = models.ForeignKey(Action, on_delete=models.CASCADE, related_name="mcp_handles")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = gettext_lazy("MCP handle")
        verbose_name_plural = gettext_lazy("MCP handles")
        indexes = [models.Index(fields=["expires_at"], name="mcp_handle_expiry")]

    def __str__(self) -> str:
        return f"{self.kind} {self.digest[:12]}"


class DrillStatus(models.TextChoices):
    QUEUED = "queued", gettext_lazy("Queued")
    RUNNING = "running", gettext_lazy("Running")
    PASSED = "passed", gettext_lazy("Passed")
    FAILED = "failed", gettext_lazy("Failed")


class DrillRun(models.Model):
    """One press of the drills button: the seed's trajectories rehearsed in the sandbox by a
    worker task. ``results`` holds one object per trajectory (what ran, the rows, the reply,
    whether the trace reconstructs, pass/fail and why)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    status = models.CharField(
        max_length=16, choices=DrillStatus.choices, default=DrillStatus.QUEUED
    )
    results = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = gettext_lazy("drill run")
        verbose_name_plural = gettext_lazy("drill runs")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"drill {self.id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (DrillStatus.PASSED, DrillStatus.FAILED)
