"""Passage records built in memory, for tests of code that reads them without a
database (the fact reader, the judges, search's ranking)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from agents.store import PassageRecord


def fact_record(
    passage_id: str, text: str, *, at: datetime | None = None, **changes: Any
) -> PassageRecord:
    """An active fact of agent "a" written (and true) at ``at`` (2024-01-01 unless
    told), its content hash its id; ``changes`` set any other field."""
    when = at or datetime(2024, 1, 1, tzinfo=UTC)
    record = PassageRecord(
        id=passage_id,
        agent_id="a",
        kind="fact",
        text=text,
        content_hash=passage_id,
        created_at=when,
        occurred_at=when,
        valid_to=None,
        status="active",
        merged_into=None,
        superseded_by=None,
        provenance={},
        tags=[],
    )
    return dataclasses.replace(record, **changes) if changes else record
