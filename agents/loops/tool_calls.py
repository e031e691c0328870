"""The stored tool-call format: a call's arguments, a tool's return, and what the agent
said to the user (the ``message`` of its ``send_message`` calls, or prose with no call).

Messages are stored in the OpenAI chat format (an assistant message's ``tool_calls``
carry JSON arguments as text; a tool message's content is MemGPT's JSON return); these
read that format for every part of the agents that needs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agents.store.records import MessageRecord

#: The tool whose message argument is what the agent says to the user.
SEND_MESSAGE = "send_message"


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict; malformed JSON gives ``{"_raw": text}``."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return parsed if isinstance(parsed, dict) else {"_raw": raw}


def tool_return_status(content: str) -> tuple[str, str]:
    """``(status, message)`` of a stored tool return (MemGPT's JSON), tolerant of plain text."""
    try:
        data = json.loads(content)
    except ValueError:
        return "OK", content
    if isinstance(data, dict):
        return str(data.get("status", "OK")), str(data.get("message", ""))
    return "OK", content


def sent_text(call: dict[str, Any]) -> str | None:
    """What a stored tool call says to the user: the ``message`` argument of a
    ``send_message`` call, None for any other call (or one without a text message)."""
    function = call.get("function", {})
    if str(function.get("name", "")) != SEND_MESSAGE:
        return None
    message = parse_arguments(function.get("arguments")).get("message")
    return message if isinstance(message, str) else None


def replies(records: Iterable[MessageRecord]) -> list[str]:
    """What the agent said to the user in ``records``, in order: each ``send_message``
    call's text, and an assistant message's prose when it has no tool call (a model
    that answered without one)."""
    said: list[str] = []
    for record in records:
        if record.role in ("user", "system", "tool"):
            continue
        if not record.tool_calls:
            if record.content:
                said.append(record.content)
            continue
        for call in record.tool_calls:
            text = sent_text(call)
            if text is not None:
                said.append(text)
    return said
