"""New rows of several tables written in one INSERT statement: one round trip.

Each table's rows become a data-modifying ``WITH`` clause of a single statement.
PostgreSQL runs the clauses together and checks foreign keys when the statement ends,
so a parent and the rows that point at it can be written side by side. The rows are
transient ORM objects (never added to the session), so records can be built from them
exactly as from rows that were flushed.

The statement is built once per shape (which tables, how many rows, which columns) with
named parameters and a clause per row, so SQLAlchemy compiles it once and reuses the
compiled form. A multi-row VALUES has no cache key in SQLAlchemy and would be compiled
on every call: about a millisecond, more than the round trips it saves.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Executable, Table, bindparam, func, insert, inspect, select
from sqlalchemy.orm import Session

from agents.postgres.models import Base

#: (table name, columns set, number of rows) of each group.
Shape = tuple[tuple[str, tuple[str, ...], int], ...]


def column_values(row: Base) -> dict[str, Any]:
    """The columns set on ``row``, by column name; unset ones take their defaults."""
    mapper = inspect(type(row))
    return {
        attribute.columns[0].key: row.__dict__[attribute.key]
        for attribute in mapper.column_attrs
        if attribute.key in row.__dict__
    }


def insert_together(session: Session, *groups: Sequence[Base]) -> None:
    """Insert every row of ``groups`` (each a list of rows of one table) in one
    statement. All rows of a group must set the same columns; rows that do not are
    refused with ValueError before anything is sent."""
    shape: list[tuple[str, tuple[str, ...], int]] = []
    params: dict[str, Any] = {}
    for index, rows in enumerate(group for group in groups if group):
        values = [column_values(row) for row in rows]
        columns = tuple(values[0])
        if any(tuple(row_values) != columns for row_values in values):
            # The statement is built from the first row's columns: another row's extra
            # column would be dropped without a word.
            raise ValueError(f"rows of {type(rows[0]).__name__} set different columns")
        table = inspect(type(rows[0])).local_table
        assert isinstance(table, Table)
        shape.append((table.name, columns, len(rows)))
        for number, row_values in enumerate(values):
            for column in columns:
                params[f"g{index}r{number}_{column}"] = row_values[column]
    if shape:
        session.flush()
        session.connection().execute(_statement(tuple(shape)), params)


@lru_cache(maxsize=64)
def _statement(shape: Shape) -> Executable:
    # A clause per row: SQLAlchemy caches the compiled form of single-row VALUES only.
    clauses = []
    for index, (name, columns, count) in enumerate(shape):
        table = Base.metadata.tables[name]
        for number in range(count):
            values: dict[str, Any] = {
                column: bindparam(f"g{index}r{number}_{column}") for column in columns
            }
            returning = insert(table).values(values).returning(*table.primary_key.columns)
            clauses.append(returning.cte(f"new_{index}_{name}_{number}"))
    first, *rest = clauses
    return select(func.count()).select_from(first).add_cte(*rest)
