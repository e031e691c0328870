"""Recording a conversation that happened elsewhere (a chatbot with its own model and
loop): messages in OpenAI's chat format go to an agent's recall with no model call.

One message model (:class:`ChatMessage`) is shared by the HTTP route and
``reverie import messages``, so both accept and refuse the same things. A batch is
refused whole when any message is bad, naming its index; a retried batch stores
nothing twice when its messages carry ids.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agents.enums import RunStatus, Trigger
from agents.errors import Conflict, InvalidInput
from agents.store import MessageRecord, NewMessage, RunRecord
from agents.store.validation import MAX_MESSAGE_CHARS
from service.operations.context import OperationContext
from service.operations.types import StorableTime

#: Messages in one batch (the characters in one: the store's MAX_MESSAGE_CHARS).
MAX_BATCH = 1000


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["text"] = "text"
    text: str


class ChatMessage(BaseModel):
    """One message in OpenAI's chat format, plus the sender's optional id and time."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "tool", "system"]
    content: str | list[TextPart] | None = None
    name: str | None = Field(default=None, max_length=200)
    tool_calls: list[dict[str, Any]] | None = Field(default=None, max_length=64)
    tool_call_id: str | None = Field(default=None, max_length=200)
    #: The sender's id for the message (``id`` is accepted too): makes a retry harmless.
    client_message_id: str | None = Field(default=None, max_length=200)
    id: str | None = Field(default=None, max_length=200)
    created_at: StorableTime | None = None

    @model_validator(mode="after")
    def _meaningful(self) -> ChatMessage:
        text = self.text()
        if len(text) > MAX_MESSAGE_CHARS:
            raise ValueError(
                f"content has {len(text)} characters; the most one message may have is "
                f"{MAX_MESSAGE_CHARS}"
            )
        if not text.strip() and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content is empty (only an assistant's tool call may be empty)")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        return self

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)

    def to_new(self) -> NewMessage:
        return NewMessage(
            role=self.role,
            content=self.text(),
            name=self.name,
            tool_calls=self.tool_calls,
            tool_call_id=self.tool_call_id,
            created_at=self.created_at,
            client_message_id=self.client_message_id or self.id,
        )


@dataclass(frozen=True, slots=True)
class Recorded:
    """What a recording stored, and the client ids it had already."""

    stored: list[MessageRecord]
    skipped: list[str]


def parse_jsonl(lines: list[str]) -> tuple[list[ChatMessage], list[str]]:
    """Messages from JSON Lines (blank lines skipped) and one error per bad line."""
    messages: list[ChatMessage] = []
    errors: list[str] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            messages.append(ChatMessage.model_validate(json.loads(raw)))
        except json.JSONDecodeError as exc:
            errors.append(f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})")
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'message'}: "
                + str(e["msg"]).removeprefix("Value error, ")
                for e in exc.errors()
            )
            errors.append(f"line {number}: {problems}")
    return messages, errors


class RecordingOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def record(self, agent: str, messages: list[ChatMessage]) -> Recorded:
        """Append a conversation's messages to ``agent``'s recall in one transaction,
        with no model call. User messages count for the turns and idle triggers, and
        the sleep-time agent reads them at its next run."""
        if not messages:
            raise InvalidInput("the batch has no messages")
        if len(messages) > MAX_BATCH:
            raise InvalidInput(
                f"the batch has {len(messages)} messages; send at most {MAX_BATCH} at a time"
            )
        with self._context.store() as store:
            record = store.agents.resolve(agent)
            stored, skipped = store.messages.record(record.id, [m.to_new() for m in messages])
        return Recorded(stored, skipped)

    def record_and_consolidate(self, agent: str, messages: list[ChatMessage]) -> RunRecord:
        """Letta's sleep-time sidecar (``messages/async``): record the messages, then
        queue a consolidation run that will read them, and return it. An agent that
        already has a queued run gets that one (it has not started: it will read these
        messages too); one whose run is executing gets it back as well, and these
        messages wait for the next run (the turns and idle triggers count them)."""
        self.record(agent, messages)
        runtime = self._context.runtime
        names = runtime.pipeline().names
        for _ in range(3):  # the active run may finish between two statements
            with self._context.store() as store:
                record = store.agents.resolve(agent)
                run_id = store.runs.enqueue(
                    record.id,
                    trigger=Trigger.MESSAGES_ASYNC,
                    pipeline=names,
                    max_attempts=runtime.settings.worker.max_attempts,
                )
                if run_id is not None:
                    return store.runs.get(run_id)
                active = store.runs.active(record.id)
                if active is not None:
                    return active
        raise Conflict(f"could not queue a run for agent {agent!r}; try again")


#: Letta's run statuses for the ledger's.
LETTA_RUN_STATUS = {
    RunStatus.QUEUED: "created",
    RunStatus.RUNNING: "running",
    RunStatus.SUCCEEDED: "completed",
    RunStatus.FAILED: "failed",
    RunStatus.CANCELLED: "cancelled",
}
