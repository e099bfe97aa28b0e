"""The engine's hand-written SQL: every statement whole, named, beside the figure that justifies
it; ``tests/agentops/runtime/test_store.py`` compares each with what the ORM reads or saves.

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

How a statement is written: one string per statement, whole. The only things filled in are the
column lists a model's metadata gives (``{run}``, ``{action_sets}``, ...), once per process at
first use (``_sql``); nothing is added to or left out of a statement per call. A statement that
saves some of a row's columns sets each column it may save (ACTION_MOVE_COLUMNS,
RUN_MOVE_COLUMNS) and keeps those the call does not name
(``CASE WHEN 'col' = ANY(%(a_saved)s) THEN %(a_col)s ELSE col END``): one text, so one prepared
statement per connection whatever is saved, where a SET list per combination of fields would be
a statement of its own to prepare.

Writes follow the ORM's ``save()`` (``_save_table``): an INSERT writes every local concrete
field but generated ones (and an auto-increment key, which the database numbers), each value
from ``pre_save`` (``auto_now``/``auto_now_add``) and ``get_db_prep_save``; Python defaults,
callables included, are on the instance since it was built; a field with ``db_default`` (and no
Python default) is written ``DEFAULT``, and it and the key are read back with ``RETURNING``. An
UPDATE of ``fields`` writes what ``save(update_fields=fields)`` writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Field, Model
from django.db.models.expressions import DatabaseDefault
from django.db.transaction import TransactionManagementError

from accounts.models import User
from accounts.selectors import roles_column, roles_from
from agentops.models import (
    OPEN_ACTION_STATUSES,
    Action,
    ActionStatus,
    AgentRun,
    RunStatus,
    TraceEvent,
)
from config import sqlrows

# ---------------------------------------------------------------------------------------------
# Reads
# ---------------------------------------------------------------------------------------------

# A run with its subject: a step's plain read of the run, 1.2 -> 0.5 ms (bench/README.md,
# "runtime overhead").
RUN_SQL = """
SELECT {run}, {user}
  FROM agentops_agentrun r JOIN accounts_user u ON u.id = r.subject_id
 WHERE r.id = %(run)s
"""

# The same, locked until the transaction ends: select_for_update + select_related 1.8 ->
# 0.7 ms (bench/README.md, "runtime overhead").
RUN_LOCK_SQL = """
SELECT {run}, {user}
  FROM agentops_agentrun r JOIN accounts_user u ON u.id = r.subject_id
 WHERE r.id = %(run)s
   FOR UPDATE OF r
"""

# The run, then its action, each locked, in one statement: 3.9 -> 0.8 ms (bench/README.md,
# "runtime overhead"). The run's lock is taken inside the CTE; the action's at the top of the
# outer query, which has no row to lock before the CTE has given its own (the order of
# runtime.locks). Both rows are read from their lock, so each is the latest version even after
# a wait (a plain join would read the action as of the statement's start). The subject's roles
# come with the run: a call's end that takes the run's next turn in its own transaction
# (runtime.steps, "the next step here") gates that step with them, as a turn's claim does.
RUN_ACTION_LOCK_SQL = """
WITH r AS MATERIALIZED (
    SELECT {run}, {user}, {roles} AS roles
      FROM agentops_agentrun r JOIN accounts_user u ON u.id = r.subject_id
     WHERE r.id = %(run)s
       FOR UPDATE OF r
)
SELECT r.*, {action}
  FROM r, agentops_action a
 WHERE a.id = %(action)s AND a.run_id = %(run)s
   FOR UPDATE OF a
"""

# An action with its run and the run's subject, not locked: what an approval's recheck reads
# (before an approver's decision is signed, and on every card of the approvals inbox). Through
# the ORM (select_related of the run and its subject) the query cost more to build than to run.
ACTION_RUN_SQL = """
SELECT {run}, {user}, {action}
  FROM agentops_action a
  JOIN agentops_agentrun r ON r.id = a.run_id
  JOIN accounts_user u ON u.id = r.subject_id
 WHERE a.id = %(action)s
"""

# A run's actions in proposal order: 1.2 -> 0.5 ms (bench/README.md, "runtime overhead").
ACTIONS_SQL = """
SELECT {action} FROM agentops_action a WHERE a.run_id = %(run)s ORDER BY a.turn, a.call_index
"""

# One turn's actions, the same.
TURN_ACTIONS_SQL = """
SELECT {action} FROM agentops_action a
 WHERE a.run_id = %(run)s AND a.turn = %(turn)s
 ORDER BY a.turn, a.call_index
"""

# Another action of the same run that already succeeded with the same tool and arguments; the
# first such call, the write itself, never a later deduplicated copy. Through the ORM, a
# filtered ``first()``: ~2 ms of CPU per write, 7% of the worker's (bench/README.md, "runtime
# overhead").
SAME_SUCCEEDED_SQL = """
SELECT {action} FROM agentops_action a
 WHERE a.run_id = %(run)s AND a.tool = %(tool)s AND a.params_digest = %(digest)s
   AND a.status = %(succeeded)s AND a.id <> %(action)s
 ORDER BY a.turn, a.call_index
 LIMIT 1
"""

# A planning step's claim of its turn (agentops.runtime.steps), in one statement that also
# reads what the step needs: the run, its subject and the subject's roles. The run is running,
# has no call open, is within its turns and deadline, and is at the turn before (or at this turn
# with nothing proposed yet: a step that died after its claim). Through the ORM (a filtered
# update with two Exists subqueries) the claim alone cost ~4 ms per step on the 2-core
# machine, 3 of them compiling the query; with the read and the roles it replaces, three round
# trips become one (bench/README.md, "Fewer round trips per run").
TURN_CLAIM_SQL = """
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

# API clients poll this read while a run goes on (agentops.selectors.run_detail_for_user).
# Through the ORM (the run, its events, its succeeded writes: three queries and a model per
# row) it cost ~5 ms of CPU in the web process on the 2-core machine; as one statement, with
# PostgreSQL gathering the events and receipts as JSON, ~1 ms (bench/README.md, "API reads").
RUN_DETAIL_SQL = """
SELECT r.id, r.kind, r.status, r.outcome, r.reply, r.goal, r.conversation_id, r.delegation, r.turn,
       r.created_at, r.finished_at,
       (SELECT json_agg(json_build_array(e.seq, e.kind, e.created_at, e.action_id, e.payload)
                        ORDER BY e.seq)
          FROM agentops_traceevent e WHERE e.run_id = r.id),
       (SELECT json_agg(json_build_array(a.tool, a.result -> 'data')
                        ORDER BY a.turn, a.call_index)
          FROM agentops_action a
         WHERE a.run_id = r.id AND NOT a.readonly AND a.status = %(succeeded)s)
  FROM agentops_agentrun r
 WHERE r.id = %(run)s AND r.subject_id = %(subject)s
"""

# ---------------------------------------------------------------------------------------------
# Writes
# ---------------------------------------------------------------------------------------------

# A run or an action inserted with one prepared statement: a direct call's run insert 1.8 ->
# 1.55 ms (bench/README.md, "runtime overhead").
RUN_INSERT_SQL = """
INSERT INTO agentops_agentrun ({run_insert_columns}) VALUES ({run_insert_values})
RETURNING {run_returning}
"""

ACTION_INSERT_SQL = """
INSERT INTO agentops_action ({action_insert_columns}) VALUES ({action_insert_values})
RETURNING {action_returning}
"""

# ``save(update_fields=...)`` of an action: 1.1 -> 0.6 ms (bench/README.md, "runtime overhead").
ACTION_SAVE_SQL = """
UPDATE agentops_action SET {action_sets} WHERE id = %(action)s
"""

# A trace event, numbered under the run's row lock, in one statement. (Two statements through
# the ORM cost a round trip more for each of the ~12 events of a run; bench/README.md, "trace
# events".)
EVENT_APPEND_SQL = """
WITH numbered AS (
    UPDATE agentops_agentrun SET event_seq = event_seq + 1 WHERE id = %(run)s RETURNING event_seq
)
INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
SELECT %(run)s, numbered.event_seq, %(kind)s, %(action)s, %(payload)s::jsonb, %(at)s
  FROM numbered
RETURNING id, seq
"""

# What changed with an event goes in the event's statement: one round trip, not two (a run's
# column changes riding in the UPDATE that numbers their event: -6 statements per run;
# bench/README.md, "Fewer round trips per run"). These four are EVENT_APPEND_SQL with that
# change.

# A new run and its first event.
RUN_INSERT_EVENT_SQL = """
WITH saved AS (
    INSERT INTO agentops_agentrun ({run_insert_columns}) VALUES ({run_insert_values})
    RETURNING {run_returning}
), event AS (
    INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
    VALUES (%(run)s, 1, %(kind)s, NULL, %(payload)s::jsonb, %(at)s)
    RETURNING id, seq
)
SELECT event.id, event.seq, saved.* FROM event, saved
"""

# A run's columns (a status move, a counter) saved with its event.
RUN_SAVE_EVENT_SQL = """
WITH numbered AS (
    UPDATE agentops_agentrun SET event_seq = event_seq + 1, {run_sets}
     WHERE id = %(run)s
    RETURNING event_seq
)
INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
SELECT %(run)s, numbered.event_seq, %(kind)s, %(action)s, %(payload)s::jsonb, %(at)s
  FROM numbered
RETURNING id, seq
"""

# The same with events of the run numbered just before it, in their order (a last planning
# step's model_step and its writes' verifications, then run_finished): one statement where each
# event took one. The events come as arrays, one element per event.
RUN_SAVE_EVENTS_SQL = """
WITH numbered AS (
    UPDATE agentops_agentrun SET event_seq = event_seq + %(n)s, {run_sets}
     WHERE id = %(run)s
    RETURNING event_seq
)
INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
SELECT %(run)s, numbered.event_seq - %(n)s + e.n, e.kind, e.action, e.payload::jsonb, e.at
  FROM numbered,
       unnest(%(kinds)s::varchar[], %(actions)s::uuid[], %(payloads)s::text[],
              %(ats)s::timestamptz[]) WITH ORDINALITY AS e(kind, action, payload, at, n)
RETURNING id, seq
"""

# A new action and its event (the gate's, a compensation planned), with the run's columns the
# caller names (a proposal counted).
ACTION_INSERT_EVENT_SQL = """
WITH saved AS (
    INSERT INTO agentops_action ({action_insert_columns}) VALUES ({action_insert_values})
    RETURNING {action_returning}
), numbered AS (
    UPDATE agentops_agentrun SET event_seq = event_seq + 1, {run_sets}
     WHERE id = %(run)s
    RETURNING event_seq
), event AS (
    INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
    SELECT %(run)s, numbered.event_seq, %(kind)s, %(action)s, %(payload)s::jsonb, %(at)s
      FROM numbered
    RETURNING id, seq
)
SELECT event.id, event.seq, saved.* FROM event, saved
"""

# The same with an event of the run numbered just before the action's (a planning step's
# model_step, then its first proposal's gate event): one statement instead of two per step
# that proposes (bench/README.md, "issue 25").
ACTION_INSERT_EVENTS_SQL = """
WITH saved AS (
    INSERT INTO agentops_action ({action_insert_columns}) VALUES ({action_insert_values})
    RETURNING {action_returning}
), numbered AS (
    UPDATE agentops_agentrun SET event_seq = event_seq + 2, {run_sets}
     WHERE id = %(run)s
    RETURNING event_seq
), earlier AS (
    INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
    SELECT %(run)s, numbered.event_seq - 1, %(b_kind)s, NULL, %(b_payload)s::jsonb, %(b_at)s
      FROM numbered
    RETURNING id, seq
), event AS (
    INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
    SELECT %(run)s, numbered.event_seq, %(kind)s, %(action)s, %(payload)s::jsonb, %(at)s
      FROM numbered
    RETURNING id, seq
)
SELECT earlier.id, earlier.seq, event.id, event.seq, saved.* FROM earlier, event, saved
"""

# An action's move and its event (runtime.transitions), with the run's columns the caller names
# (a call counted).
ACTION_SAVE_EVENT_SQL = """
WITH saved AS (
    UPDATE agentops_action SET {action_sets} WHERE id = %(action)s RETURNING id
), numbered AS (
    UPDATE agentops_agentrun SET event_seq = event_seq + 1, {run_sets}
     WHERE id = %(run)s
    RETURNING event_seq
), event AS (
    INSERT INTO agentops_traceevent (run_id, seq, kind, action_id, payload, created_at)
    SELECT %(run)s, numbered.event_seq, %(kind)s, %(action)s, %(payload)s::jsonb, %(at)s
      FROM numbered
    RETURNING id, seq
)
SELECT event.id, event.seq FROM event, saved
"""

# ---------------------------------------------------------------------------------------------
# Column lists from the models' metadata, and the parameters that go with them
# ---------------------------------------------------------------------------------------------

_RUN, _ACTION = "r", "a"  # the parameter prefixes of a run's and an action's columns

# The columns the save statements may set: what a move changes (runtime.transitions), an
# action's progress and a run's status and counters. Every one of them is in the statement,
# kept as it is unless named; a name outside them is refused. A longer list would make a
# statement psycopg no longer caches the parsing of (over 4096 characters or 50 parameters:
# +0.35 ms of CPU per call, measured with every column of the action and the run in
# ACTION_SAVE_EVENT_SQL; tests/agentops/runtime/test_store.py checks the bound).
ACTION_MOVE_COLUMNS = (
    "status",
    "result",
    "attempts",
    "task_id",
    "lease_expires_at",
    "started_at",
    "finished_at",
    "duration_ms",
)
RUN_MOVE_COLUMNS = (
    "status",
    "outcome",
    "reply",
    "finished_at",
    "tool_calls",
    "proposals",
    "deadline",  # extended while a call waits for its approval (approval.waiting_deadlines)
    "turn",  # taken by a call's end that plans the next step in its transaction (run_turn_take)
    "updated_at",
)


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def insert_fields(model: type[Model]) -> list[Field]:
    """The fields ``Model.save()`` inserts: the local concrete ones but generated fields and an
    auto-increment key (the database numbers it)."""
    meta = model._meta
    if meta.parents:
        raise TypeError(f"{model.__name__}: a model with parents is several tables")
    return [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]


def database_default(field: Field) -> bool:
    """Whether an insert leaves ``field`` to the database (``db_default`` and no Python default:
    the instance holds ``DatabaseDefault``, which the ORM writes as DEFAULT)."""
    return field.has_db_default() and not field.has_default()


def returning_fields(model: type[Model]) -> list[Field]:
    """What an insert reads back: the key, and every field the database fills in (an
    auto-increment key, ``db_default``), as ``Model.save()`` does."""
    meta = model._meta
    return [meta.pk, *(f for f in meta.db_returning_fields if f is not meta.pk)]


def saved_fields(model: type[Model], names: Iterable[str]) -> list[Field]:
    """The fields ``names`` of ``model``, each one an UPDATE may set (as
    ``save(update_fields=...)``: local, concrete, not the key, not generated)."""
    return [_saved_field(model, name) for name in names]


@cache
def _saved_field(model: type[Model], name: str) -> Field:
    field = model._meta.get_field(name)
    if (
        not isinstance(field, Field)  # a reverse relation: not a column either
        or field not in model._meta.local_concrete_fields
        or field.primary_key
        or field.generated
    ):
        raise ValueError(f"{model._meta.label}: {field.name} is not a column to save")
    return field


@cache
def insert_lists(model: type[Model], prefix: str) -> dict[str, str]:
    """An INSERT's column list, its VALUES list (``%(prefix_column)s``, DEFAULT for a field the
    database fills in) and its RETURNING list."""
    fields = insert_fields(model)
    return {
        "insert_columns": ", ".join(_q(f.column) for f in fields),
        "insert_values": ", ".join(
            "DEFAULT" if database_default(f) else f"%({prefix}_{f.column})s" for f in fields
        ),
        "returning": ", ".join(_q(f.column) for f in returning_fields(model)),
    }


@cache
def set_list(model: type[Model], prefix: str, names: tuple[str, ...]) -> str:
    """The columns ``names``, each set to its parameter when its name is among
    ``%(prefix_saved)s`` and kept as it is otherwise."""
    return ",\n       ".join(
        f"{_q(f.column)} = CASE WHEN '{f.column}' = ANY(%({prefix}_saved)s::text[])"
        f" THEN %({prefix}_{f.column})s ELSE {_q(f.column)} END"
        for f in saved_fields(model, names)
    )


@cache
def _lists() -> dict[str, str]:
    run, action = insert_lists(AgentRun, _RUN), insert_lists(Action, _ACTION)
    return {
        "run": sqlrows.columns(AgentRun, "r"),
        "user": sqlrows.columns(User, "u"),
        "action": sqlrows.columns(Action, "a"),
        "roles": roles_column("u.id"),
        **{f"run_{name}": text for name, text in run.items()},
        **{f"action_{name}": text for name, text in action.items()},
        "run_sets": set_list(AgentRun, _RUN, RUN_MOVE_COLUMNS),
        "action_sets": set_list(Action, _ACTION, ACTION_MOVE_COLUMNS),
    }


@cache
def _sql(statement: str) -> str:
    """``statement`` with the models' column lists filled in (once per statement)."""
    return statement.format(**_lists())


def _prepared(field: Field, value: Any) -> Any:
    if hasattr(value, "resolve_expression"):
        raise TypeError(f"{field}: the store saves values, not expressions ({value!r})")
    return field.get_db_prep_save(value, connection)


def insert_params(instance: Model, prefix: str) -> dict[str, Any]:
    """The parameters of ``insert_lists(type(instance), prefix)`` as ``instance.save()`` would
    prepare them (``pre_save`` fills in ``auto_now``/``auto_now_add``)."""
    meta, params = instance._meta, {}
    if meta.auto_field is not None and getattr(instance, meta.auto_field.attname) is not None:
        raise ValueError(f"{meta.label}: the database numbers {meta.auto_field.name}")
    for field in insert_fields(type(instance)):
        value = field.pre_save(instance, add=True)
        if database_default(field):
            if not isinstance(value, DatabaseDefault):  # the statement writes DEFAULT
                raise ValueError(
                    f"{meta.label}.{field.name}: the store inserts the database's default;"
                    " save a value of your own afterwards"
                )
            continue
        params[f"{prefix}_{field.column}"] = _prepared(field, value)
    return params


@cache
def _unset(model: type[Model], prefix: str, columns: tuple[str, ...]) -> dict[str, None]:
    return {f"{prefix}_{f.column}": None for f in saved_fields(model, columns)}


def save_params(
    instance: Model, names: Iterable[str], prefix: str, columns: tuple[str, ...]
) -> dict[str, Any]:
    """The parameters of ``set_list(type(instance), prefix, columns)`` that save ``names`` of
    ``instance`` as ``save(update_fields=names)`` would (an ``auto_now`` field named gets the
    current time) and keep every other column."""
    params: dict[str, Any] = dict(_unset(type(instance), prefix, columns))
    saved = []
    for field in saved_fields(type(instance), names):
        key = f"{prefix}_{field.column}"
        if key not in params:
            raise ValueError(f"{instance._meta.label}: {field.name} is not a column this saves")
        params[key] = _prepared(field, field.pre_save(instance, add=False))
        saved.append(field.column)
    params[f"{prefix}_saved"] = saved
    return params


def inserted(instance: Model, returned: tuple[Any, ...]) -> None:
    """Take what the insert returned and mark ``instance`` saved, as ``Model.save()`` does."""
    for field, value in zip(returning_fields(type(instance)), returned, strict=True):
        if value is not None and hasattr(field, "from_db_value"):
            value = field.from_db_value(value, None, connection)
        setattr(instance, field.attname, value)
    instance._state.adding = False
    instance._state.db = DEFAULT_DB_ALIAS


def _event_params(event: TraceEvent) -> dict[str, Any]:
    payload = TraceEvent._meta.get_field("payload")
    return {
        "run": event.run_id,
        "kind": event.kind,
        "action": event.action_id,
        "payload": _prepared(payload, event.payload),
        "at": event.created_at,
    }


def _one(statement: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(_sql(statement), params)
        return cursor.fetchone()


def _count(statement: str, params: dict[str, Any]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(_sql(statement), params)
        return cursor.rowcount


def _fetch(statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(_sql(statement), params)
        return cursor.fetchall()


def _need_transaction() -> None:
    if not connection.in_atomic_block:  # as select_for_update: a lock outside one is a bug
        raise TransactionManagementError("a row lock needs a transaction")


def _not_updated(instance: Action) -> Exception:
    return type(instance).NotUpdated("Save with update_fields did not affect any rows.")


def _one_of_run(statement: str, params: dict[str, Any]) -> tuple[Any, ...]:
    """The row of a statement that numbers an event from its run's row. No row only when that
    run's row is gone: the run's NotUpdated, as an ORM save of it would raise (before, a
    TypeError unpacking None)."""
    row = _one(statement, params)
    if row is None:
        raise AgentRun.NotUpdated("The run's row is gone: no event was numbered.")
    return row


# ---------------------------------------------------------------------------------------------
# Reads, one statement each
# ---------------------------------------------------------------------------------------------


def run_with_subject(run_id: Any, *, lock: bool = False) -> AgentRun | None:
    """The run with its subject loaded (RUN_SQL); ``lock``: locked until the transaction ends
    (RUN_LOCK_SQL)."""
    if lock:
        _need_transaction()
    rows = _fetch(RUN_LOCK_SQL if lock else RUN_SQL, {"run": run_id})
    if not rows:
        return None
    run, run.subject = sqlrows.instances(rows[0], AgentRun, User)
    return run


def turn_claim(
    run_id: Any, turn: int, *, now: datetime, max_turns: int
) -> tuple[AgentRun, frozenset[str]] | None:
    """Take turn ``turn`` of the run for planning (TURN_CLAIM_SQL; ``max_turns`` when the run's
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
    rows = _fetch(TURN_CLAIM_SQL, params)
    if not rows:
        return None
    run, run.subject = sqlrows.instances(rows[0], AgentRun, User)
    return run, roles_from(user=run.subject, names=rows[0][-1])


def run_action_locked(run_id: Any, action_id: Any) -> tuple[AgentRun, Action] | None:
    """The run (with its subject and, in ``roles_as_locked``, the subject's roles) and its
    action, both locked until the transaction ends, in one statement (RUN_ACTION_LOCK_SQL);
    None if either is missing or the action is not the run's."""
    _need_transaction()
    rows = _fetch(RUN_ACTION_LOCK_SQL, {"run": run_id, "action": action_id})
    if not rows:
        return None
    row, split = rows[0], _run_user_width()
    run, run.subject = sqlrows.instances(row[:split], AgentRun, User)
    run.roles_as_locked = roles_from(user=run.subject, names=row[split])
    action = sqlrows.instance(Action, row[split + 1 :])
    action.run = run
    return run, action


def action_with_run(action_id: Any) -> Action | None:
    """The action with its run and the run's subject loaded (ACTION_RUN_SQL), as
    ``select_related("run", "run__subject")``; None: no such action."""
    rows = _fetch(ACTION_RUN_SQL, {"action": action_id})
    if not rows:
        return None
    row, split = rows[0], _run_user_width()
    run, run.subject = sqlrows.instances(row[:split], AgentRun, User)
    action = sqlrows.instance(Action, row[split:])
    action.run = run
    return action


@cache
def _run_user_width() -> int:
    return len(AgentRun._meta.concrete_fields) + len(User._meta.concrete_fields)


def run_turn_take(run: AgentRun, turn: int) -> None:
    """Take turn ``turn`` of the locked ``run`` for planning without a statement of its own: the
    turn is saved by the next statement that saves the run's columns (every save below adds
    it while it is unsaved), in the caller's transaction. A turn's claim in one statement is
    turn_claim; this is for a caller that has checked what the claim checks on the run it
    holds locked (runtime.steps, "the next step here")."""
    run.turn = turn
    run.unsaved_fields = tuple(dict.fromkeys((*run.unsaved_fields, "turn")))


def run_unsaved_save(run: AgentRun) -> None:
    """Save what run_turn_take left unsaved, and ``updated_at``, when nothing else saved it."""
    if run.unsaved_fields:
        fields = [*run.unsaved_fields, "updated_at"]
        run.unsaved_fields = ()
        run.save(update_fields=fields)


def _run_save_params(run: AgentRun, fields: Iterable[str]) -> dict[str, Any]:
    """save_params of ``fields`` of ``run`` and of what run_turn_take left unsaved; nothing
    named and nothing unsaved saves nothing (``updated_at`` included). What is left unsaved
    counts as saved from here: the statement these go in saves it, or the transaction fails."""
    names = tuple(dict.fromkeys((*fields, *run.unsaved_fields)))
    run.unsaved_fields = ()
    if names and "updated_at" not in names:
        names = (*names, "updated_at")
    return save_params(run, names, _RUN, RUN_MOVE_COLUMNS)


def run_actions(run: AgentRun, *, turn: int | None = None) -> list[Action]:
    """The run's actions (ACTIONS_SQL) or one turn's (TURN_ACTIONS_SQL) in proposal order, each
    knowing its run."""
    rows = (
        _fetch(ACTIONS_SQL, {"run": run.pk})
        if turn is None
        else _fetch(TURN_ACTIONS_SQL, {"run": run.pk, "turn": turn})
    )
    actions = [sqlrows.instance(Action, row) for row in rows]
    for action in actions:
        action.run = run
    return actions


def action_same_succeeded(action: Action) -> Action | None:
    """Another action of the same run that already succeeded with the same tool and arguments
    (SAME_SUCCEEDED_SQL)."""
    params = {
        "run": action.run_id,
        "tool": action.tool,
        "digest": action.params_digest,
        "succeeded": ActionStatus.SUCCEEDED.value,
        "action": action.pk,
    }
    rows = _fetch(SAME_SUCCEEDED_SQL, params)
    return sqlrows.instance(Action, rows[0]) if rows else None


def run_detail_row(run_id: Any, subject_id: Any) -> tuple[Any, ...] | None:
    """The subject's run as RUN_DETAIL_SQL selects it (its columns, its events and the data of
    its succeeded writes as JSON); None for a run that is not theirs."""
    rows = _fetch(
        RUN_DETAIL_SQL,
        {"succeeded": ActionStatus.SUCCEEDED.value, "run": run_id, "subject": subject_id},
    )
    return rows[0] if rows else None


# ---------------------------------------------------------------------------------------------
# Writes, one statement each. The event statements number the event under the run's row lock
# (held until the caller's transaction ends) and fill in ``event.pk`` and ``event.seq``; the
# push after commit is agentops.runtime.trace's.
# ---------------------------------------------------------------------------------------------


def run_insert(run: AgentRun) -> AgentRun:
    """``run.save()`` of a new run (RUN_INSERT_SQL)."""
    row = _one(RUN_INSERT_SQL, insert_params(run, _RUN))
    inserted(run, row)
    return run


def action_insert(action: Action) -> Action:
    """``action.save()`` of a new action (ACTION_INSERT_SQL)."""
    row = _one(ACTION_INSERT_SQL, insert_params(action, _ACTION))
    inserted(action, row)
    return action


def action_save(action: Action, fields: Iterable[str]) -> None:
    """``action.save(update_fields=fields)`` (ACTION_SAVE_SQL)."""
    params = {"action": action.pk, **save_params(action, fields, _ACTION, ACTION_MOVE_COLUMNS)}
    if not _count(ACTION_SAVE_SQL, params):
        raise _not_updated(action)


def event_append(event: TraceEvent) -> None:
    """Insert ``event`` as the next of its run (EVENT_APPEND_SQL)."""
    event.pk, event.seq = _one_of_run(EVENT_APPEND_SQL, _event_params(event))


def run_insert_with_event(run: AgentRun, event: TraceEvent) -> None:
    """Insert the new ``run`` and ``event``, its first (RUN_INSERT_EVENT_SQL)."""
    run.event_seq = 1
    params = {**insert_params(run, _RUN), **_event_params(event)}
    event.pk, event.seq, *returned = _one_of_run(RUN_INSERT_EVENT_SQL, params)
    inserted(run, tuple(returned))


def run_save_with_event(run: AgentRun, fields: Iterable[str], event: TraceEvent) -> None:
    """Save ``fields`` of ``run`` and its ``updated_at``, as ``save(update_fields=...)`` would,
    with ``event`` (RUN_SAVE_EVENT_SQL)."""
    params = {
        **_run_save_params(run, (*fields, "updated_at")),
        **_event_params(event),
    }
    event.pk, event.seq = _one_of_run(RUN_SAVE_EVENT_SQL, params)


def run_save_with_events(
    run: AgentRun, fields: Iterable[str], events: Sequence[TraceEvent]
) -> None:
    """Save ``fields`` of ``run`` and its ``updated_at`` with ``events`` of it, numbered in
    their order (RUN_SAVE_EVENTS_SQL); each gets its ``pk`` and ``seq``."""
    if not events or any(e.run_id != run.pk for e in events):
        raise ValueError("events of this run, at least one")
    payload = TraceEvent._meta.get_field("payload")
    params = {
        **_run_save_params(run, (*fields, "updated_at")),
        "run": run.pk,
        "n": len(events),
        "kinds": [e.kind for e in events],
        "actions": [e.action_id for e in events],
        "payloads": [json.dumps(e.payload, cls=payload.encoder) for e in events],
        "ats": [e.created_at for e in events],
    }
    rows = _fetch(RUN_SAVE_EVENTS_SQL, params)
    if not rows:
        raise AgentRun.NotUpdated("The run's row is gone: no event was numbered.")
    for event, (pk, seq) in zip(events, sorted(rows, key=lambda row: row[1]), strict=True):
        event.pk, event.seq = pk, seq


def action_insert_with_event(
    action: Action,
    event: TraceEvent,
    *,
    run: AgentRun,
    run_fields: tuple[str, ...] = (),
    before: TraceEvent | None = None,
) -> None:
    """Insert the new ``action`` with ``event``, saving ``run_fields`` of ``run`` (and then its
    ``updated_at``) in the same statement (ACTION_INSERT_EVENT_SQL); ``before``: an event of
    the run about no action, numbered just before ``event`` (ACTION_INSERT_EVENTS_SQL)."""
    params = {
        **insert_params(action, _ACTION),
        **_run_save_params(run, run_fields),
        **_event_params(event),
    }
    if before is None:
        event.pk, event.seq, *returned = _one_of_run(ACTION_INSERT_EVENT_SQL, params)
    else:
        if before.action_id is not None or before.run_id != event.run_id:
            raise ValueError("the earlier event is the same run's, about no action")
        earlier = _event_params(before)
        params |= {
            "b_kind": earlier["kind"],
            "b_payload": earlier["payload"],
            "b_at": earlier["at"],
        }
        row = _one_of_run(ACTION_INSERT_EVENTS_SQL, params)
        before.pk, before.seq, event.pk, event.seq, *returned = row
    inserted(action, tuple(returned))


def action_save_with_event(
    action: Action,
    fields: Iterable[str],
    event: TraceEvent,
    *,
    run: AgentRun,
    run_fields: tuple[str, ...] = (),
) -> None:
    """Save ``fields`` of ``action`` with ``event``, and ``run_fields`` of ``run`` (and then its
    ``updated_at``), in one statement (ACTION_SAVE_EVENT_SQL)."""
    params = {
        **save_params(action, fields, _ACTION, ACTION_MOVE_COLUMNS),
        **_run_save_params(run, run_fields),
        **_event_params(event),
    }
    row = _one(ACTION_SAVE_EVENT_SQL, params)
    if row is None:
        raise _not_updated(action)
    event.pk, event.seq = row
