"""Every row lock of the runtime, in one order: the run first, then its action.

A transaction that needs both always locks the run first, so run-level work (a step, a cancel)
and action-level work (execution, reconciliation) never deadlock.

Hand-written SQL on purpose: every step and every attempt locks the run (with its subject) and
its action. Through the ORM (select_for_update + select_related) that cost 1.8 ms for the run
and 2.2 ms for the action on the 2-core machine, most of it building the query; the same rows
read with one prepared statement each and turned into models the way the ORM does (the fields'
from_db_value, Model.from_db) cost ~0.6 ms each (bench/README.md, "runtime overhead").
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model
from django.db.transaction import TransactionManagementError

from accounts.models import User
from agentops.models import Action, AgentRun


@cache
def _columns(model: type[Model], alias: str) -> str:
    return ", ".join(
        f"{alias}.{connection.ops.quote_name(f.column)}" for f in model._meta.concrete_fields
    )


def _model(model: type[Model], values: tuple[Any, ...]) -> Model:
    """A model instance from its concrete columns' values, converted as the ORM converts them."""
    fields = model._meta.concrete_fields
    converted = [
        f.from_db_value(v, None, connection) if v is not None and hasattr(f, "from_db_value") else v
        for f, v in zip(fields, values, strict=True)
    ]
    return model.from_db(DEFAULT_DB_ALIAS, None, converted)


_RUN_SQL = (
    "SELECT {run}, {user} FROM agentops_agentrun r JOIN accounts_user u ON u.id = r.subject_id"
    " WHERE r.id = %s FOR UPDATE OF r"
)
_ACTION_SQL = "SELECT {action} FROM agentops_action a WHERE a.id = %s AND a.run_id = %s FOR UPDATE"


@cache
def _run_sql() -> str:
    return _RUN_SQL.format(run=_columns(AgentRun, "r"), user=_columns(User, "u"))


@cache
def _action_sql() -> str:
    return _ACTION_SQL.format(action=_columns(Action, "a"))


def _run_locked(run_id: Any) -> AgentRun | None:
    if not connection.in_atomic_block:  # as select_for_update: a lock outside one is a bug
        raise TransactionManagementError("a run lock needs a transaction")
    with connection.cursor() as cursor:
        cursor.execute(_run_sql(), [run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(AgentRun._meta.concrete_fields)
    run = _model(AgentRun, row[:split])
    run.subject = _model(User, row[split:])
    return run


def lock_run(run_id: Any) -> AgentRun:
    """The run row, locked until the caller's transaction ends, with its subject loaded."""
    run = _run_locked(run_id)
    if run is None:
        raise AgentRun.DoesNotExist(f"no run {run_id}")
    return run


def lock_action(action_id: Any, *, run_id: Any = None) -> tuple[AgentRun, Action] | None:
    """The action's run, then the action, both locked; None if the action does not exist (or
    is not of ``run_id``). A caller that knows the run saves the look-up."""
    if run_id is None:
        run_id = Action.objects.filter(pk=action_id).values_list("run_id", flat=True).first()
        if run_id is None:
            return None
    run = _run_locked(run_id)
    if run is None:
        return None
    with connection.cursor() as cursor:
        cursor.execute(_action_sql(), [action_id, run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    action = _model(Action, row)
    action.run = run
    return run, action
