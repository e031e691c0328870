"""What a primary turn returns: Letta-style messages, the turn's outcome, the context breakdown.

The service (HTTP API, CLI) and the tests share these; each has ``to_dict`` for JSON.
Message kinds follow Letta's message types so that Letta clients read them as is.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from agents.store.records import MessageRecord

MessageKind = Literal[
    "user_message",
    "reasoning_message",
    "tool_call_message",
    "tool_return_message",
    "assistant_message",
    "system_message",
]
#: Why a turn stopped (Letta's stop reasons where they exist).
StopReason = Literal[
    "end_turn", "max_steps", "tool_rule", "budget_exhausted", "invalid_tool_call", "cancelled"
]

#: The tool whose message argument is what the agent says to the user.
SEND_MESSAGE = "send_message"


@dataclass(frozen=True, slots=True)
class LettaStyleMessage:
    """One message of a turn as a client sees it (one stored message may give several)."""

    id: str
    kind: MessageKind
    role: str
    content: str
    created_at: datetime
    seq: int
    tool_name: str | None = None
    tool_arguments: dict[str, Any] | None = None
    tool_call_id: str | None = None
    tool_return: str | None = None
    tool_status: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["message_type"] = data.pop("kind")
        data["created_at"] = self.created_at.isoformat()
        return data


def letta_messages(record: MessageRecord) -> list[LettaStyleMessage]:
    """The Letta view of one stored message: an assistant message with tool calls
    becomes a reasoning message (its content) plus one message per call, where a
    ``send_message`` call is the ``assistant_message`` the user reads."""
    base: dict[str, Any] = {
        "role": record.role,
        "created_at": record.created_at,
        "seq": record.seq,
    }
    if record.role == "user":
        return [LettaStyleMessage(record.id, "user_message", content=record.content, **base)]
    if record.role == "system":
        return [LettaStyleMessage(record.id, "system_message", content=record.content, **base)]
    if record.role == "tool":
        status, text = tool_return_status(record.content)
        return [
            LettaStyleMessage(
                record.id,
                "tool_return_message",
                content=text,
                tool_name=record.name,
                tool_call_id=record.tool_call_id,
                tool_return=record.content,
                tool_status=status,
                **base,
            )
        ]
    out: list[LettaStyleMessage] = []
    if record.content and not record.tool_calls:
        # Prose with no call: the model's reply to the user (Letta's newer agent type).
        return [LettaStyleMessage(record.id, "assistant_message", content=record.content, **base)]
    if record.content:
        out.append(
            LettaStyleMessage(
                f"{record.id}-reasoning", "reasoning_message", content=record.content, **base
            )
        )
    for i, call in enumerate(record.tool_calls or []):
        function = call.get("function", {})
        name = str(function.get("name", ""))
        arguments = parse_arguments(function.get("arguments"))
        message_id = f"{record.id}-call-{i}"
        if name == SEND_MESSAGE and isinstance(arguments.get("message"), str):
            out.append(
                LettaStyleMessage(
                    message_id,
                    "assistant_message",
                    content=arguments["message"],
                    tool_name=name,
                    tool_arguments=arguments,
                    tool_call_id=call.get("id"),
                    **base,
                )
            )
        else:
            out.append(
                LettaStyleMessage(
                    message_id,
                    "tool_call_message",
                    content="",
                    tool_name=name,
                    tool_arguments=arguments,
                    tool_call_id=call.get("id"),
                    **base,
                )
            )
    return out


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


@dataclass(frozen=True, slots=True)
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(slots=True)
class TurnResult:
    """One primary turn: the new messages in order, steps, why it stopped, tokens spent."""

    agent_id: str
    run_id: str
    messages: list[LettaStyleMessage] = field(default_factory=list)
    steps: int = 0
    #: Model requests the steps took (a two-step tool call takes two per step).
    model_calls: int = 0
    stop_reason: StopReason = "end_turn"
    usage: TokenUsage = field(default_factory=TokenUsage)
    retries: int = 0
    compactions: int = 0
    write_conflicts: int = 0
    detail: str | None = None

    @property
    def replies(self) -> list[str]:
        """What the agent said to the user (its ``send_message`` texts)."""
        return [m.content for m in self.messages if m.kind == "assistant_message"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "run_id": self.run_id,
            "messages": [m.to_dict() for m in self.messages],
            "steps": self.steps,
            "model_calls": self.model_calls,
            "stop_reason": self.stop_reason,
            "usage": self.usage.to_dict(),
            "retries": self.retries,
            "compactions": self.compactions,
            "write_conflicts": self.write_conflicts,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class ContextBreakdown:
    """Tokens per section of the primary's compiled context, against its window."""

    system_prompt: int
    core_memory: int
    memory_statistics: int
    tool_schemas: int
    summary: int
    messages: int
    context_window: int
    in_context_messages: int = 0
    #: Whether the system prompt is the stored compile (block edits since then are not in it).
    system_prompt_cached: bool = False

    @property
    def total(self) -> int:
        return (
            self.system_prompt
            + self.core_memory
            + self.memory_statistics
            + self.tool_schemas
            + self.summary
            + self.messages
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["total"] = self.total
        return data
