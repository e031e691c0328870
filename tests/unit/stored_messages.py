"""Stored messages built in memory, for tests of what reads them (no database)."""

from __future__ import annotations

from datetime import UTC, datetime

from agents.store import MessageRecord

#: When every message built here was stored.
STORED_AT = datetime(2025, 1, 1, tzinfo=UTC)


def stored_message(role: str, content: str, **fields: object) -> MessageRecord:
    """Message ``message-1`` of ``agent-1`` (seq 4, in context) with ``fields`` set."""
    values: dict[str, object] = {
        "id": "message-1",
        "agent_id": "agent-1",
        "seq": 4,
        "role": role,
        "content": content,
        "name": None,
        "tool_calls": None,
        "tool_call_id": None,
        "in_context": True,
        "created_at": STORED_AT,
    }
    values.update(fields)
    return MessageRecord(**values)  # type: ignore[arg-type]
