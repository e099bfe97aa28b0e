"""Rows read with a hand-written statement, turned into model instances the way the ORM does.

For the few reads where a benchmark showed the ORM's query building costing more than the
query (each says so beside its statement). The SELECT list of a model's columns comes from its
metadata, in field order, and each value goes through its field's ``from_db_value`` before
``Model.from_db``, as a queryset would do; the rest of each statement (tables, conditions) is
written by hand beside its figure. No model signals are involved in reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model


@cache
def columns(model: type[Model], alias: str) -> str:
    """Every concrete column of ``model`` as ``alias."column"``, in field order."""
    return ", ".join(
        # A concrete field always has a column (only its type allows None).
        f"{alias}.{connection.ops.quote_name(f.column)}"  # type: ignore[arg-type]
        for f in model._meta.concrete_fields
    )


def instances(row: Sequence[Any], *models: type[Model]) -> list[Any]:
    """One instance per model from a row that selected ``columns`` of each, in that order."""
    found, start = [], 0
    for model in models:
        end = start + len(model._meta.concrete_fields)
        found.append(instance(model, row[start:end]))
        start = end
    return found


def instance(model: type[Model], values: Sequence[Any]) -> Any:
    """A model instance from its concrete columns' values, converted as the ORM converts them."""
    fields = model._meta.concrete_fields
    converted = [
        f.from_db_value(v, None, connection) if v is not None and hasattr(f, "from_db_value") else v
        for f, v in zip(fields, values, strict=True)
    ]
    # Every concrete column is given, so Django never reads the field names (the stubs want
    # them all the same).
    return model.from_db(DEFAULT_DB_ALIAS, None, converted)  # type: ignore[arg-type]
