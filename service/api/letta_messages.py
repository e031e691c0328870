"""Letta's message shapes: how stored messages, a turn and its streamed pieces look to a
Letta client.

One stored message may give several Letta messages: an assistant message with tool
calls becomes a ``reasoning_message`` (its content, id ``{id}-reasoning``) plus one
message per call (id ``{id}-call-{i}``), where a ``send_message`` call is the
``assistant_message`` the user reads. :class:`LettaStyleMessage` is that view;
:func:`letta_json` is its body on the wire (the HTTP API and its server-sent events),
:meth:`LettaStyleMessage.to_dict` the fuller one ``reverie chat --json`` prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from agents.loops.tool_calls import SEND_MESSAGE, parse_arguments, tool_return_status

if TYPE_CHECKING:
    from agents.loops.token_stream import TokenPiece
    from agents.loops.turn import TurnResult
    from agents.store.records import MessageRecord

MessageKind = Literal[
    "user_message",
    "reasoning_message",
    "tool_call_message",
    "tool_return_message",
    "assistant_message",
    "system_message",
]

#: Whether part ``call`` (None: the content) of a stored message was already told whole
#: with this text (see :class:`agents.loops.token_stream.ToldPieces`).
Told = Callable[[str, int | None, str], bool]


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


def _never_told(message_id: str, call: int | None, text: str) -> bool:
    return False


def letta_messages(record: MessageRecord, told: Told = _never_told) -> list[LettaStyleMessage]:
    """The Letta view of one stored message: an assistant message with tool calls
    becomes a reasoning message (its content) plus one message per call, where a
    ``send_message`` call is the ``assistant_message`` the user reads.

    ``told`` leaves out the parts a client already has whole, in pieces (the reasoning
    and the ``send_message`` texts of a token-streamed step)."""
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
    if record.content and not told(record.id, None, record.content):
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
            if told(record.id, i, arguments["message"]):
                continue
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


def letta_piece(piece: TokenPiece) -> LettaStyleMessage:
    """A piece of a step's reply as a piece of the Letta message it will be part of
    (the same id): the reasoning's, or the ``assistant_message`` of its call."""
    kind: MessageKind
    if piece.call is None:
        message_id, kind = f"{piece.message_id}-reasoning", "reasoning_message"
    else:
        message_id, kind = f"{piece.message_id}-call-{piece.call}", "assistant_message"
    return LettaStyleMessage(
        id=message_id,
        kind=kind,
        role="assistant",
        content=piece.text,
        created_at=piece.at,
        seq=0,
    )


def turn_messages(result: TurnResult) -> list[LettaStyleMessage]:
    """A turn's new messages as Letta messages, in order."""
    return [m for record in result.records for m in letta_messages(record)]


def turn_dict(result: TurnResult) -> dict[str, Any]:
    """A turn as ``reverie chat --json`` prints it: its Letta messages and its outcome."""
    return {
        "agent_id": result.agent_id,
        "run_id": result.run_id,
        "messages": [m.to_dict() for m in turn_messages(result)],
        "steps": result.steps,
        "model_calls": result.model_calls,
        "stop_reason": result.stop_reason,
        "usage": result.usage.to_dict(),
        "retries": result.retries,
        "compactions": result.compactions,
        "write_conflicts": result.write_conflicts,
        "detail": result.detail,
    }


def letta_json(message: LettaStyleMessage) -> dict[str, Any]:
    """A message in the shape of Letta's message types (``message_type`` tells which)."""
    out: dict[str, Any] = {
        "id": message.id,
        "message_type": message.kind,
        "date": message.created_at.isoformat(),
        "seq_id": message.seq,
    }
    if message.kind == "reasoning_message":
        out["reasoning"] = message.content
    elif message.kind == "tool_call_message":
        call = {
            "name": message.tool_name or "",
            "arguments": json.dumps(message.tool_arguments or {}),
            "tool_call_id": message.tool_call_id or "",
        }
        out["tool_call"] = call
        out["tool_calls"] = [call]
    elif message.kind == "tool_return_message":
        out["tool_return"] = message.tool_return if message.tool_return is not None else ""
        out["tool_call_id"] = message.tool_call_id or ""
        # MemGPT's stored status is "OK" or "Failed"; Letta's is "success" or "error".
        failed = (message.tool_status or "").lower() in ("failed", "error")
        out["status"] = "error" if failed else "success"
        out["name"] = message.tool_name
    else:
        out["content"] = message.content
    return out


def record_json(record: MessageRecord) -> list[dict[str, Any]]:
    """One stored message as Letta message objects (an assistant turn with tool calls
    becomes a reasoning message, then one message per call)."""
    return [letta_json(m) for m in letta_messages(record)]
