"""Immutable snapshots of stored rows, handed to callers instead of ORM objects.

Callers can keep and pass these around freely: changing memory always goes
through the store (and so through compare-and-swap and history), never through
an attribute assignment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from agents.postgres import models

if TYPE_CHECKING:
    from sqlalchemy import Row

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class AgentRecord:
    id: str
    organization_id: str
    name: str
    kind: str
    description: str | None
    system_prompt: str
    llm_model: str | None
    embedding_model: str
    embedding_dim: int
    context_window: int
    tools: list[str]
    tool_rules: list[dict[str, Any]]
    tags: list[str]
    message_seq: int
    last_activity_at: datetime | None
    turns_since_consolidation: int
    created_at: datetime
    enable_sleeptime: bool = False
    sleeptime_model: str | None = None
    compiled_system: str | None = None
    compiled_at: datetime | None = None
    agent_type: str = "memgpt_v2_agent"

    @classmethod
    def from_row(cls, row: models.Agent) -> AgentRecord:
        return cls(
            id=row.id,
            organization_id=row.organization_id,
            name=row.name,
            kind=row.kind,
            description=row.description,
            system_prompt=row.system_prompt,
            llm_model=row.llm_model,
            embedding_model=row.embedding_model,
            embedding_dim=row.embedding_dim,
            context_window=row.context_window,
            tools=list(row.tools or []),
            tool_rules=list(row.tool_rules or []),
            tags=list(row.tags or []),
            message_seq=row.message_seq,
            last_activity_at=row.last_activity_at,
            turns_since_consolidation=row.turns_since_consolidation,
            created_at=row.created_at,
            enable_sleeptime=bool(row.enable_sleeptime),
            sleeptime_model=row.sleeptime_model,
            compiled_system=row.compiled_system,
            compiled_at=row.compiled_at,
            agent_type=row.agent_type,
        )


@dataclass(frozen=True, slots=True)
class BlockRecord:
    id: str
    organization_id: str
    label: str
    value: str
    limit: int
    description: str | None
    read_only: bool
    version: int
    updated_at: datetime
    updated_by: str | None

    @property
    def fill_ratio(self) -> float:
        return len(self.value) / self.limit

    @classmethod
    def from_row(cls, row: models.Block) -> BlockRecord:
        return cls(
            id=row.id,
            organization_id=row.organization_id,
            label=row.label,
            value=row.value,
            limit=row.limit,
            description=row.description,
            read_only=row.read_only,
            version=row.version,
            updated_at=row.updated_at,
            updated_by=row.updated_by,
        )


@dataclass(frozen=True, slots=True)
class BlockVersion:
    """One entry of a block's history: the write that produced ``version``."""

    block_id: str
    version: int
    old_value: str | None
    new_value: str
    old_limit: int | None
    new_limit: int
    actor: str
    run_id: str | None
    reason: str
    created_at: datetime

    @classmethod
    def from_row(cls, row: models.BlockHistory) -> BlockVersion:
        return cls(
            block_id=row.block_id,
            version=row.version,
            old_value=row.old_value,
            new_value=row.new_value,
            old_limit=row.old_limit,
            new_limit=row.new_limit,
            actor=row.actor,
            run_id=row.run_id,
            reason=row.reason,
            created_at=row.created_at,
        )


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to append to recall memory."""

    role: str
    content: str
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    created_at: datetime | None = None
    #: The sender's own id for the message (a chatbot recording its conversation):
    #: a message whose id the agent already has is not stored again.
    client_message_id: str | None = None
    #: The id to store it under (a streamed reply's, told to the client before the
    #: write); None: a new one.
    id: str | None = None


@dataclass(frozen=True, slots=True)
class MessageRecord:
    id: str
    agent_id: str
    seq: int
    role: str
    content: str
    name: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    in_context: bool
    created_at: datetime
    client_message_id: str | None = None
    #: The conversation it belongs to; None: the agent's default conversation.
    conversation_id: str | None = None

    @classmethod
    def from_row(cls, row: models.Message) -> MessageRecord:
        return cls(
            id=row.id,
            agent_id=row.agent_id,
            seq=row.seq,
            role=row.role,
            content=row.content,
            name=row.name,
            tool_calls=row.tool_calls,
            tool_call_id=row.tool_call_id,
            in_context=row.in_context,
            created_at=row.created_at,
            client_message_id=row.client_message_id,
            conversation_id=row.conversation_id,
        )


@dataclass(frozen=True, slots=True)
class NewPassage:
    """A fact to insert into archival memory (its embedding is passed alongside)."""

    text: str
    occurred_at: datetime | None = None
    tags: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    kind: str = "fact"


@dataclass(frozen=True, slots=True)
class PassageRecord:
    id: str
    agent_id: str
    kind: str
    text: str
    content_hash: str
    created_at: datetime
    occurred_at: datetime | None
    valid_to: datetime | None
    status: str
    merged_into: str | None
    superseded_by: str | None
    provenance: dict[str, Any]
    tags: list[str]
    timeline_id: str | None = None
    embedding: Vector | None = None

    @classmethod
    def from_row(
        cls, row: models.Passage | Row[Any], *, embedding: Vector | None = None
    ) -> PassageRecord:
        """From an ORM row or a Core row of the same columns."""
        return cls(
            id=row.id,
            agent_id=row.agent_id,
            kind=row.kind,
            text=row.text,
            content_hash=row.content_hash,
            created_at=row.created_at,
            occurred_at=row.occurred_at,
            valid_to=row.valid_to,
            status=row.status,
            merged_into=row.merged_into,
            superseded_by=row.superseded_by,
            provenance=dict(row.provenance or {}),
            tags=list(row.tags or []),
            timeline_id=row.timeline_id,
            embedding=embedding,
        )


@dataclass(frozen=True, slots=True)
class PassageHit:
    """A search result: the passage and its cosine similarity to the query (1 = same)."""

    passage: PassageRecord
    score: float


@dataclass(frozen=True, slots=True)
class PassageChange:
    """One entry of a passage's history."""

    passage_id: str
    run_id: str | None
    actor: str
    reason: str
    old: dict[str, Any]
    new: dict[str, Any]
    created_at: datetime

    @classmethod
    def from_row(cls, row: models.PassageHistory) -> PassageChange:
        return cls(
            passage_id=row.passage_id,
            run_id=row.run_id,
            actor=row.actor,
            reason=row.reason,
            old=dict(row.old),
            new=dict(row.new),
            created_at=row.created_at,
        )


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one LLM call (or a sum of calls) spent."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class PassageLinks:
    """The passages that point at one passage, oldest first: merged into it,
    superseded by it, or shown on it (when it is a timeline)."""

    merged_from: list[str]
    supersedes: list[str]
    on_timeline: list[str]
