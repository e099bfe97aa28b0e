"""Saving chosen columns of a row in one prepared statement.

Hand-written on purpose: the runtime saves a few columns of a run or an action at every step
and attempt. ``Model.save(update_fields=...)`` spent ~0.6 ms per call on the 2-core machine
building the UPDATE, more than the round trip; this builds the same statement from the model's
metadata (the fields' ``pre_save`` and ``get_db_prep_save``, as the ORM does) and PostgreSQL
plans it once per connection (bench/README.md, "runtime overhead"). No model signals are sent:
nothing in the product listens to them for these models.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import Model

_UPDATE_SQL = "UPDATE {table} SET {sets} WHERE {pk} = %s"


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


def row_save(instance: Model, names: Iterable[str]) -> None:
    """``instance.save(update_fields=names)`` in one statement."""
    items, values = set_items(instance, names)
    meta = instance._meta
    sql = _UPDATE_SQL.format(
        table=connection.ops.quote_name(meta.db_table),
        sets=", ".join(items),
        pk=connection.ops.quote_name(meta.pk.column),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, instance.pk])
