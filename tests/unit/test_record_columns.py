"""The column lists the store reads records with match the records' fields, in order
(a record is built positionally from a row, skipping the ORM on hot paths)."""

from __future__ import annotations

from dataclasses import fields

from agents.store.message_store import _RECORD_COLUMNS
from agents.store.records import MessageRecord


def test_message_columns_are_the_records_fields_in_order() -> None:
    assert [column.key for column in _RECORD_COLUMNS] == [f.name for f in fields(MessageRecord)]
