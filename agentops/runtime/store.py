"""The runtime's hottest rows, read and saved with one prepared statement each.

Hand-written on purpose. Every step and every attempt reads the run (with its subject) and its
actions, locks them, and saves a few columns. Through the ORM each of those cost 1-2 ms on the
2-core machine, most of it building the query (``select_for_update`` + ``select_related`` of
the run 1.8 ms, of an action 2.2 ms, a run's actions 1.2 ms, ``save(update_fields=...)`` 1.1
ms, inserting a run or an action ~1 ms); the same statements, their column lists taken from the
models' metadata and their rows turned into models the way the ORM does (``config.sqlrows``:
each field's ``from_db_value``, ``Model.from_db``; ``pre_save`` and ``get_db_prep_save`` when
saving), cost the round trip and little more: 0.4-0.7 ms
(bench/README.md, "runtime overhead"). No model signals are sent: nothing in the product
listens to them for these models.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model
from django.db.transaction import TransactionManagementError

from accounts.models import User
from accounts.selectors import roles_column, roles_from
from agentops.models import OPEN_ACTION_STATUSES, Action, ActionStatus, AgentRun, RunStatus
from config import sqlrows

_UPDATE_SQL = "UPDATE {table} SET {sets} WHERE {pk} = %s"
_INSERT_SQL = "INSERT INTO {table} ({columns}) VALUES ({values})"
_RUN_SQL = (
    "SELECT {run}, {user} FROM agentops_agentrun r JOIN accounts_user u ON u.id = r.subject_id"
    " WHERE r.id = %s"
)
# The run, then its action, each locked, in one statement. The run's lock is taken inside the
# CTE; the action's at the top of the outer query, which has no row to lock before the CTE has
# given its own (the order of runtime.locks). Both rows are read from their lock, so each is
# the latest version even after a wait (a plain join would read the action as of the
# statement's start).
_RUN_ACTION_SQL = (
    "WITH r AS MATERIALIZED ({run_lock})"
    " SELECT r.*, {action} FROM r, agentops_action a WHERE a.id = %s AND a.run_id = %s"
    " FOR UPDATE OF a"
)
_ACTIONS_SQL = "SELECT {action} FROM agentops_action a WHERE a.run_id = %s"
_ORDER = " ORDER BY a.turn, a.call_index"
_SAME_SUCCEEDED = (
    " AND a.tool = %s AND a.params_digest = %s AND a.status = %s AND a.id <> %s"
    + _ORDER  # the first such call: the write itself, never a later deduplicated copy
    + " LIMIT 1"
)

# A planning step's claim of its turn (agentops.runtime.steps), in one statement that also
# reads what the step needs: the run, its subject and the subject's roles. The run is running,
# has no call open, is within its turns and deadline, and is at the turn before (or at this turn
# with nothing proposed yet: a step that died after its claim). Through the ORM (a filtered
# update with two Exists subqueries) the claim alone cost ~4 ms per step on the 2-core
# machine, 3 of them compiling the query; with the read and the roles it replaces, three round
# trips become one (bench/README.md, "Fewer round trips per run").
_CLAIM_SQL = """
UPDATE agentops_agentrun AS r SET turn = %(turn)s, updated_at = %(now)s
  FROM accounts_user AS u
 WHERE r.id = %(run)s AND u.id = r.subject_id AND r.status = %(running)s
   AND r.deadline > %(now)s
   AND %(turn)s <= COALESCE((r.budgets ->> 'max_turns')::int, %(max_turns)s)
   AND (r.turn = %(turn)s - 1
        OR (r.turn = %(turn)s
            AND NOT EXISTS (SELECT 1 FROM agentops_action a
                             WHERE a.run_id = r.id AND a.turn = %(turn)s)))
   AND NOT EXISTS (SELECT 1 FROM agentops_action a
                    WHERE a.run_id = r.id AND a.status = ANY(%(open)s))
RETURNING {run}, {user}, {roles}
"""


@cache
def _sql(name: str) -> str:
    run, user, action = (
        sqlrows.columns(AgentRun, "r"),
        sqlrows.columns(User, "u"),
        sqlrows.columns(Action, "a"),
    )
    return {
        "run": _RUN_SQL.format(run=run, user=user),
        "run_lock": _RUN_SQL.format(run=run, user=user) + " FOR UPDATE OF r",
        "run_action_lock": _RUN_ACTION_SQL.format(
            run_lock=_RUN_SQL.format(run=run, user=user) + " FOR UPDATE OF r", action=action
        ),
        "actions": _ACTIONS_SQL.format(action=action) + _ORDER,
        "turn_actions": _ACTIONS_SQL.format(action=action) + " AND a.turn = %s" + _ORDER,
        "same_succeeded": _ACTIONS_SQL.format(action=action) + _SAME_SUCCEEDED,
        "turn_claim": _CLAIM_SQL.format(run=run, user=user, roles=roles_column("u.id")),
    }[name]


def _fetch(name: str, params: list[Any] | dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(_sql(name), params)
        return cursor.fetchall()


def _need_transaction() -> None:
    if not connection.in_atomic_block:  # as select_for_update: a lock outside one is a bug
        raise TransactionManagementError("a row lock needs a transaction")


def run_with_subject(run_id: Any, *, lock: bool = False) -> AgentRun | None:
    """The run with its subject loaded; ``lock``: locked until the transaction ends."""
    if lock:
        _need_transaction()
    rows = _fetch("run_lock" if lock else "run", [run_id])
    if not rows:
        return None
    run, run.subject = sqlrows.instances(rows[0], AgentRun, User)
    return run


def turn_claim(
    run_id: Any, turn: int, *, now: datetime, max_turns: int
) -> tuple[AgentRun, frozenset[str]] | None:
    """Take turn ``turn`` of the run for planning (_CLAIM_SQL; ``max_turns`` when the run's
    budgets do not say): the run with its subject, and the subject's roles, as of the claim;
    None when the turn is not there to take (a duplicate delivery, a call open, the budgets
    spent)."""
    params = {
        "run": run_id,
        "turn": turn,
        "now": now,
        "max_turns": max_turns,
        "running": RunStatus.RUNNING.value,
        "open": sorted(s.value for s in OPEN_ACTION_STATUSES),
    }
    rows = _fetch("turn_claim", params)
    if not rows:
        return None
    run, run.subject = sqlrows.instances(rows[0], AgentRun, User)
    return run, roles_from(user=run.subject, names=rows[0][-1])


def run_action_locked(run_id: Any, action_id: Any) -> tuple[AgentRun, Action] | None:
    """The run (with its subject) and its action, both locked until the transaction ends, in
    one statement; None if either is missing or the action is not the run's."""
    _need_transaction()
    rows = _fetch("run_action_lock", [run_id, action_id, run_id])
    if not rows:
        return None
    run, run.subject, action = sqlrows.instances(rows[0], AgentRun, User, Action)
    action.run = run
    return run, action


def run_actions(run: AgentRun, *, turn: int | None = None) -> list[Action]:
    """The run's actions (or one turn's) in proposal order, each knowing its run."""
    rows = _fetch("actions", [run.pk]) if turn is None else _fetch("turn_actions", [run.pk, turn])
    actions = [sqlrows.instance(Action, row) for row in rows]
    for action in actions:
        action.run = run
    return actions


def action_same_succeeded(action: Action) -> Action | None:
    """Another action of the same run that already succeeded with the same tool and arguments
    (through the ORM, a filtered ``first()``: ~2 ms of CPU per write, 7% of the worker's)."""
    rows = _fetch(
        "same_succeeded",
        [action.run_id, action.tool, action.params_digest, ActionStatus.SUCCEEDED.value, action.pk],
    )
    return sqlrows.instance(Action, rows[0]) if rows else None


def set_items(instance: Model, names: Iterable[str]) -> tuple[list[str], list[Any]]:
    """``col = %s`` items and their values that save ``names`` of ``instance`` as
    ``save(update_fields=names)`` would (an auto_now field listed gets the current time)."""
    items, values = [], []
    for name in names:
        field = instance._meta.get_field(name)
        value = field.pre_save(instance, add=False)
        items.append(f"{connection.ops.quote_name(field.column)} = %s")
        values.append(field.get_db_prep_save(value, connection))
    return items, values


def update_statement(instance: Model, names: Iterable[str]) -> tuple[str, list[Any]]:
    """The UPDATE that ``instance.save(update_fields=names)`` sends, and its parameters."""
    items, values = set_items(instance, names)
    meta = instance._meta
    sql = _UPDATE_SQL.format(
        table=connection.ops.quote_name(meta.db_table),
        sets=", ".join(items),
        pk=connection.ops.quote_name(meta.pk.column),
    )
    return sql, [*values, instance.pk]


def insert_statement(instance: Model) -> tuple[str, list[Any]]:
    """The INSERT of every concrete field of a new ``instance`` as the ORM prepares it
    (defaults already set on the instance, auto_now_add filled in), and its parameters; once
    it has run, ``inserted(instance)``."""
    meta = instance._meta
    fields = meta.concrete_fields
    values = [f.get_db_prep_save(f.pre_save(instance, add=True), connection) for f in fields]
    sql = _INSERT_SQL.format(
        table=connection.ops.quote_name(meta.db_table),
        columns=", ".join(connection.ops.quote_name(f.column) for f in fields),
        values=", ".join(["%s"] * len(fields)),
    )
    return sql, values


def inserted(instance: Model) -> None:
    """Mark ``instance`` saved, as the ORM does after an insert."""
    instance._state.adding = False
    instance._state.db = DEFAULT_DB_ALIAS


def row_save(instance: Model, names: Iterable[str]) -> None:
    """``instance.save(update_fields=names)`` in one statement."""
    with connection.cursor() as cursor:
        cursor.execute(*update_statement(instance, names))


def row_insert(instance: Model) -> None:
    """``instance.save(force_insert=True)`` in one statement (insert_statement)."""
    with connection.cursor() as cursor:
        cursor.execute(*insert_statement(instance))
    inserted(instance)


def row_create(model: type[Model], **fields: Any) -> Any:
    """``model.objects.create(**fields)`` in one statement (row_insert)."""
    instance = model(**fields)
    row_insert(instance)
    return instance
