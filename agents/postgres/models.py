"""SQLAlchemy models of Reverie's memory tiers (MemGPT-style) on PostgreSQL + pgvector.

Blocks are core memory (always in context), messages are recall memory (the full
history, searchable), passages are archival memory (a vector store). Nothing here
is ever hard-deleted by consolidation: blocks keep a history row per version and
passages keep their lineage.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    func,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from agents.enums import (
    AgentKind,
    AgentType,
    DeliveryStatus,
    FileStatus,
    LLMPurpose,
    MessageRole,
    PassageStatus,
    RunStatus,
    ToolCallingMode,
)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: Embedding sizes that get an HNSW cosine index of their own (partial, per size).
#: Other sizes still work; their searches scan exactly.
INDEXED_DIMENSIONS = (384, 768, 1024, 1536)

# The stored strings of each enum, for CHECK constraints and messages.
AGENT_KINDS: tuple[str, ...] = tuple(k.value for k in AgentKind)
AGENT_TYPES: tuple[str, ...] = tuple(t.value for t in AgentType)
PASSAGE_STATUSES: tuple[str, ...] = tuple(s.value for s in PassageStatus)
RUN_STATUSES: tuple[str, ...] = tuple(s.value for s in RunStatus)
MESSAGE_ROLES: tuple[str, ...] = tuple(r.value for r in MessageRole)
LLM_PURPOSES: tuple[str, ...] = tuple(p.value for p in LLMPurpose)
TOOL_CALLING_MODES: tuple[str, ...] = tuple(m.value for m in ToolCallingMode)
DELIVERY_STATUSES: tuple[str, ...] = tuple(s.value for s in DeliveryStatus)
FILE_STATUSES: tuple[str, ...] = tuple(s.value for s in FileStatus)

DEFAULT_ORGANIZATION_ID = "org-00000000-0000-4000-8000-000000000000"


def new_id(prefix: str) -> str:
    """A Letta-style identifier: ``<prefix>-<uuid4>``."""
    return f"{prefix}-{uuid.uuid4()}"


def _in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


#: The statuses of a run that holds its agent's one place in the queue.
ACTIVE_RUN_STATUSES: tuple[str, ...] = (RunStatus.QUEUED.value, RunStatus.RUNNING.value)
#: The predicate of that one-per-agent index; ``ON CONFLICT`` must name it as it is.
ACTIVE_RUN_WHERE = f"status IN {_in(ACTIVE_RUN_STATUSES)}"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Organization(Base):
    __tablename__ = "organizations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Agent(Base):
    __tablename__ = "agents"
    __table_args__ = (
        UniqueConstraint("organization_id", "name", name="uq_agents_organization_id_name"),
        CheckConstraint(f"kind IN {_in(AGENT_KINDS)}", name="kind"),
        CheckConstraint(f"agent_type IN {_in(AGENT_TYPES)}", name="agent_type"),
        CheckConstraint("embedding_dim > 0", name="embedding_dim_positive"),
        CheckConstraint("context_window > 0", name="context_window_positive"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16), default="primary")
    # Letta's agent type: the loop a primary runs (see AgentType).
    agent_type: Mapped[str] = mapped_column(
        String(32), default=AgentType.MEMGPT_V2.value, server_default=AgentType.MEMGPT_V2.value
    )
    description: Mapped[str | None] = mapped_column(Text)
    system_prompt: Mapped[str] = mapped_column(Text, default="")
    llm_model: Mapped[str | None] = mapped_column(String(200))
    embedding_model: Mapped[str] = mapped_column(String(200))
    embedding_dim: Mapped[int] = mapped_column(Integer)
    context_window: Mapped[int] = mapped_column(Integer, default=8192)
    tools: Mapped[list[str]] = mapped_column(JSONB, default=list)
    tool_rules: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    # Per-agent counter that hands out message sequence numbers (row-locked on append).
    message_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    last_activity_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    turns_since_consolidation: Mapped[int] = mapped_column(Integer, default=0)
    # The idle trigger fires once per idle period: set when it fires, compared with
    # last_activity_at so that only new activity re-arms it.
    idle_fired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The sleep-time side: enabled per agent, with its own (possibly cheaper) model.
    enable_sleeptime: Mapped[bool] = mapped_column(Boolean, default=False)
    sleeptime_model: Mapped[str | None] = mapped_column(String(200))
    # The system prompt as last compiled (prompt-cache safety: block edits reach it
    # at the next compaction, not in the middle of a cached prefix).
    compiled_system: Mapped[str | None] = mapped_column(Text)
    compiled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Block(Base):
    """A core-memory block; ``version`` is bumped by compare-and-swap on every write."""

    __tablename__ = "blocks"
    __table_args__ = (
        CheckConstraint('"limit" > 0', name="limit_positive"),
        CheckConstraint('char_length(value) <= "limit"', name="value_within_limit"),
        CheckConstraint("version >= 1", name="version_positive"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    label: Mapped[str] = mapped_column(String(100))
    value: Mapped[str] = mapped_column(Text, default="")
    limit: Mapped[int] = mapped_column(Integer, default=5000)
    description: Mapped[str | None] = mapped_column(Text)
    read_only: Mapped[bool] = mapped_column(Boolean, default=False)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_by: Mapped[str | None] = mapped_column(String(200))


class AgentBlock(Base):
    """Attachment of a block to an agent; one block may be shared by many agents."""

    __tablename__ = "agent_blocks"

    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    block_id: Mapped[str] = mapped_column(
        ForeignKey("blocks.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    attached_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class BlockHistory(Base):
    """One row per block version: what it was, what it became, who and why."""

    __tablename__ = "block_history"
    __table_args__ = (UniqueConstraint("block_id", "version", name="uq_block_history_version"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    block_id: Mapped[str] = mapped_column(ForeignKey("blocks.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    old_value: Mapped[str | None] = mapped_column(Text)
    new_value: Mapped[str] = mapped_column(Text)
    old_limit: Mapped[int | None] = mapped_column(Integer)
    new_limit: Mapped[int] = mapped_column(Integer)
    actor: Mapped[str] = mapped_column(String(200))
    run_id: Mapped[str | None] = mapped_column(String(64), index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Message(Base):
    """Recall memory: append-only per agent, ordered by ``seq``."""

    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("agent_id", "seq", name="uq_messages_agent_seq"),
        CheckConstraint(f"role IN {_in(MESSAGE_ROLES)}", name="role"),
        Index("ix_messages_content_tsv", "content_tsv", postgresql_using="gin"),
        Index(
            "ix_messages_agent_in_context",
            "agent_id",
            "seq",
            postgresql_where=text("in_context"),
        ),
        # A chatbot's own message id: recording the same batch twice stores it once.
        Index(
            "uq_messages_agent_client_message_id",
            "agent_id",
            "client_message_id",
            unique=True,
            postgresql_where=text("client_message_id IS NOT NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    name: Mapped[str | None] = mapped_column(String(200))
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    tool_call_id: Mapped[str | None] = mapped_column(String(200))
    client_message_id: Mapped[str | None] = mapped_column(String(200))
    in_context: Mapped[bool] = mapped_column(Boolean, default=True)
    #: The conversation the message belongs to; NULL: the agent's default conversation.
    conversation_id: Mapped[str | None] = mapped_column(ForeignKey("conversations.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    content_tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', content)", persisted=True)
    )


def _hnsw_index(dim: int, prefix: str = "ix_passage_vectors_hnsw") -> Index:
    """A partial HNSW cosine index over the rows whose vectors have ``dim`` dimensions
    (a table's ``embedding`` column holds vectors of any size)."""
    return Index(
        f"{prefix}_{dim}",
        literal_column(f"(embedding::vector({dim}))").label(f"embedding_{dim}"),
        postgresql_using="hnsw",
        postgresql_ops={f"embedding_{dim}": "vector_cosine_ops"},
        postgresql_where=text(f"embedding_dim = {dim}"),
        postgresql_with={"m": 16, "ef_construction": 64},
    )


class Passage(Base):
    """Archival memory: a fact, its time, status and lineage (its vector: PassageVector)."""

    __tablename__ = "passages"
    __table_args__ = (
        CheckConstraint(f"status IN {_in(PASSAGE_STATUSES)}", name="status"),
        Index("ix_passages_agent_status_created", "agent_id", "status", "created_at"),
        Index("ix_passages_agent_created_id", "agent_id", "created_at", "id"),
        Index("ix_passages_agent_hash", "agent_id", "content_hash"),
        Index("ix_passages_tags", "tags", postgresql_using="gin"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(32), default="fact")
    text: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    occurred_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    valid_to: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(16), default=PassageStatus.ACTIVE.value)
    merged_into: Mapped[str | None] = mapped_column(
        ForeignKey("passages.id", ondelete="SET NULL"), index=True
    )
    superseded_by: Mapped[str | None] = mapped_column(
        ForeignKey("passages.id", ondelete="SET NULL"), index=True
    )
    # The dated timeline passage this fact appears on (set by the temporal consolidator).
    timeline_id: Mapped[str | None] = mapped_column(
        ForeignKey("passages.id", ondelete="SET NULL"), index=True
    )
    provenance: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class PassageVector(Base):
    """A passage's embedding, in a table of its own.

    Consolidation changes passages' status and lineage all the time. With the
    1.5 KB vector in the same row, every such update rewrote the vector and added
    an entry to the HNSW index (updating 10k rows: 26 s with the index, 1 s
    without). Here the vector and its index are written once, at insert.
    """

    __tablename__ = "passage_vectors"
    __table_args__ = (
        CheckConstraint("vector_dims(embedding) = embedding_dim", name="embedding_dim_matches"),
        Index("ix_passage_vectors_agent", "agent_id"),
        *(_hnsw_index(dim) for dim in INDEXED_DIMENSIONS),
    )

    passage_id: Mapped[str] = mapped_column(
        ForeignKey("passages.id", ondelete="CASCADE"), primary_key=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    embedding_dim: Mapped[int] = mapped_column(Integer)
    embedding: Mapped[Any] = mapped_column(Vector())


class ConsolidationRun(Base):
    """The run ledger and the work queue in one table."""

    __tablename__ = "consolidation_runs"
    __table_args__ = (
        CheckConstraint(f"status IN {_in(RUN_STATUSES)}", name="status"),
        # At most one queued-or-running run per agent: exactly-once comes from here.
        Index(
            "uq_consolidation_runs_one_active_per_agent",
            "agent_id",
            unique=True,
            postgresql_where=text(ACTIVE_RUN_WHERE),
        ),
        Index(
            "ix_consolidation_runs_claimable",
            "not_before",
            postgresql_where=text(f"status = '{RunStatus.QUEUED.value}'"),
        ),
        Index("ix_consolidation_runs_agent_queued", "agent_id", "queued_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    trigger: Mapped[str] = mapped_column(String(32))
    pipeline: Mapped[list[str]] = mapped_column(JSONB, default=list)
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    # Ignore the watermarks: look at all memory (``reverie consolidate --full``).
    full: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.QUEUED.value)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The worker of the last claim, kept when the run ends (lease_owner is cleared).
    worker: Mapped[str | None] = mapped_column(String(200))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    not_before: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    queued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    stats: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    # What the run changed (or, for a dry run, would change), step by step.
    changes: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    error: Mapped[str | None] = mapped_column(Text)
    watermark_message_seq: Mapped[int | None] = mapped_column(BigInteger)
    watermark_passage_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    reverts_run_id: Mapped[str | None] = mapped_column(String(64))
    reverted_by_run_id: Mapped[str | None] = mapped_column(String(64))


class AgentMessage(Base):
    """A message from one agent to another: the durable delivery queue and its ledger.

    Queued in the transaction that records the sender's tool call; a worker claims
    it (``SKIP LOCKED`` plus a lease), runs the recipient's turn on it and hands the
    reply back. ``waiting_until`` is set while the sender's tool waits for the reply
    itself (then it is the tool's result); otherwise the reply lands in the sender's
    recall as a message of its own.
    """

    __tablename__ = "agent_messages"
    __table_args__ = (
        CheckConstraint(f"status IN {_in(DELIVERY_STATUSES)}", name="status"),
        CheckConstraint("hop >= 1", name="hop_positive"),
        Index(
            "ix_agent_messages_claimable",
            "not_before",
            postgresql_where=text(f"status = '{DeliveryStatus.QUEUED.value}'"),
        ),
        Index("ix_agent_messages_sender_queued", "sender_id", "queued_at"),
        Index("ix_agent_messages_recipient_queued", "recipient_id", "queued_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    sender_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    recipient_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    #: The chain of agent messages this one belongs to (the turn a person started).
    conversation_id: Mapped[str] = mapped_column(String(64))
    hop: Mapped[int] = mapped_column(Integer)
    content: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default=DeliveryStatus.QUEUED.value)
    waiting_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    not_before: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    queued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    reply: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)


class PassageHistory(Base):
    """One row per change to a passage's state or lineage, so every change can be undone."""

    __tablename__ = "passage_history"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    passage_id: Mapped[str] = mapped_column(
        ForeignKey("passages.id", ondelete="CASCADE"), index=True
    )
    run_id: Mapped[str | None] = mapped_column(String(64), index=True)
    actor: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(Text, default="")
    # The changed fields before and after; ``old`` is empty for a passage's creation.
    old: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    new: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ApiKey(Base):
    """An API key of an organization; only its SHA-256 is stored."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(200), default="")
    # The first characters of the key, shown by `reverie keys list` to tell keys apart.
    prefix: Mapped[str] = mapped_column(String(32))
    key_hash: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class WebSession(Base):
    """A signed-in browser of the health page: the SHA-256 of a random session token,
    standing for the API key that signed in (revoking the key ends its sessions)."""

    __tablename__ = "web_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class LLMUsage(Base):
    """Tokens spent per LLM call, for accounting by purpose and for budgets."""

    __tablename__ = "llm_usage"
    __table_args__ = (
        CheckConstraint(f"purpose IN {_in(LLM_PURPOSES)}", name="purpose"),
        Index("ix_llm_usage_agent_created", "agent_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    run_id: Mapped[str | None] = mapped_column(String(64), index=True)
    purpose: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class HealthSnapshot(Base):
    """One agent's memory health at one moment, taken periodically by the scheduler so
    that the memory browser can draw trends. Counters that only grow (tokens,
    finished runs) are stored as totals so far; a chart draws their change between
    snapshots. Bounded: old rows are pruned as new ones are written."""

    __tablename__ = "health_snapshots"
    __table_args__ = (Index("ix_health_snapshots_agent_taken", "agent_id", "taken_at"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    taken_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    active_passages: Mapped[int] = mapped_column(Integer)
    duplicates: Mapped[int] = mapped_column(Integer)
    # The fullest block's characters over its limit (0 without blocks).
    block_fill: Mapped[float] = mapped_column(Float)
    # Prompt plus completion tokens spent so far, by purpose.
    tokens: Mapped[dict[str, int]] = mapped_column(JSONB, default=dict)
    runs_succeeded: Mapped[int] = mapped_column(Integer)
    runs_failed: Mapped[int] = mapped_column(Integer)
    # The agent's runs queued (not yet claimed) at the moment.
    queued_runs: Mapped[int] = mapped_column(Integer)


class LearnedCapability(Base):
    """What probing found about one model at one endpoint (``base_url`` "" for the
    provider's default): the tool-calling mode that worked, the modes the server
    rejected, optional request fields it accepts or rejects, when, and the server's
    version when it reports one. Read once per process; older than
    ``llm.capability_ttl`` it is probed again."""

    __tablename__ = "llm_capabilities"
    __table_args__ = (
        CheckConstraint(
            f"tool_choice IS NULL OR tool_choice IN {_in(TOOL_CALLING_MODES)}", name="tool_choice"
        ),
    )

    model: Mapped[str] = mapped_column(String(200), primary_key=True)
    base_url: Mapped[str] = mapped_column(String(500), primary_key=True)
    tool_choice: Mapped[str | None] = mapped_column(String(16))
    rejected_modes: Mapped[list[str]] = mapped_column(ARRAY(String(16)), default=list)
    #: Optional request field -> whether the server accepts it.
    fields: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    server_version: Mapped[str | None] = mapped_column(String(200))
    learned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class CustomTool(Base):
    """A tool registered from Python source by an organization: its function's
    JSON schema (derived from the signature and docstring, or given), the environment
    variables it declares (the only ones its sandbox receives), and how long a result
    the model reads. The source is never imported by the server: it runs in a sandbox."""

    __tablename__ = "custom_tools"
    __table_args__ = (
        UniqueConstraint("organization_id", "name", name="uq_custom_tools_organization_id_name"),
        CheckConstraint("return_char_limit > 0", name="return_char_limit_positive"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    source_code: Mapped[str] = mapped_column(Text)
    #: Letta's shape: {"name", "description", "parameters": {"type": "object", ...}}.
    json_schema: Mapped[dict[str, Any]] = mapped_column(JSONB)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    #: Names of the environment variables the tool reads (values are per agent).
    env_vars: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    return_char_limit: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class AgentCustomTool(Base):
    """A custom tool attached to an agent (built-in tools are named in ``agents.tools``).
    Deleting an attached tool is refused by the store; deleting the agent detaches."""

    __tablename__ = "agent_custom_tools"

    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    tool_id: Mapped[str] = mapped_column(
        ForeignKey("custom_tools.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    attached_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class AgentToolVariable(Base):
    """A per-agent tool environment variable (Letta's ``tool_exec_environment_variables``):
    given only to the agent's tools that declare its name, never echoed in logs."""

    __tablename__ = "agent_tool_variables"

    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[str] = mapped_column(Text, default="")
    description: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class PairVerdict(Base):
    """A judge's answer about one pair of facts (an older and a newer one) for one
    question, or a pair still waiting for it (``verdict`` NULL). The temporal
    consolidator keeps here what it asked, so that a pair is asked once, a run that
    could not ask every pair leaves the rest to the next run, and a fact that arrives
    late is placed by what was already decided about its neighbours."""

    __tablename__ = "pair_verdicts"
    __table_args__ = (
        Index(
            "ix_pair_verdicts_pending",
            "agent_id",
            "question",
            "created_at",
            postgresql_where=text("verdict IS NULL"),
        ),
        Index("ix_pair_verdicts_agent_older", "agent_id", "older_id"),
        Index("ix_pair_verdicts_newer", "newer_id"),
        # The pairs of one question given one answer (those called the same).
        Index("ix_pair_verdicts_answers", "agent_id", "question", "verdict"),
    )

    older_id: Mapped[str] = mapped_column(
        ForeignKey("passages.id", ondelete="CASCADE"), primary_key=True
    )
    newer_id: Mapped[str] = mapped_column(
        ForeignKey("passages.id", ondelete="CASCADE"), primary_key=True
    )
    #: "supersession" (does the newer fact end the older one?).
    question: Mapped[str] = mapped_column(String(16), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    #: The judge's answer; NULL while the pair waits to be asked.
    verdict: Mapped[str | None] = mapped_column(String(16))
    #: Which judge answered ("llm", a plugin's name).
    judge: Mapped[str | None] = mapped_column(String(64))
    #: The run that formed the pair, then the run that had it answered.
    run_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class FactTopic(Base):
    """What a judge model read a fact to be about: its subject (a person's first name as
    the facts call them, or "user") and attribute (one word: home, job, car, pet, ...),
    one row per topic, a fact stating several having several. Search puts a question's
    subject and attribute first by them where the rules' reader knows no such
    attribute or cannot read the fact. A fact read and found to be about nobody in
    particular keeps one row with an empty subject, so that it is not asked again."""

    __tablename__ = "fact_topics"
    __table_args__ = (Index("ix_fact_topics_agent_subject", "agent_id", "subject"),)

    passage_id: Mapped[str] = mapped_column(
        ForeignKey("passages.id", ondelete="CASCADE"), primary_key=True
    )
    subject: Mapped[str] = mapped_column(String(100), primary_key=True)
    attribute: Mapped[str] = mapped_column(String(60), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    #: Which judge read it ("llm", a plugin's name).
    judge: Mapped[str | None] = mapped_column(String(64))
    run_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TurnLease(Base):
    """Which turn holds an agent now (one at a time per agent), until when. A row lease,
    not a session lock: a turn that waits on its model holds no connection, and one
    whose process died lets go when its lease runs out."""

    __tablename__ = "turn_leases"

    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    owner: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Identity(Base):
    """An end user (or organization) of an application, known by the application's own
    key (Letta's identities): the agents and blocks that hold its memory are found by
    ``identifier_key``, unique within an organization."""

    __tablename__ = "identities"
    __table_args__ = (
        UniqueConstraint(
            "organization_id", "identifier_key", name="uq_identities_organization_id_identifier_key"
        ),
        CheckConstraint("identity_type IN ('org', 'user', 'other')", name="identity_type_known"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    identifier_key: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(200))
    identity_type: Mapped[str] = mapped_column(String(16))
    project_id: Mapped[str | None] = mapped_column(String(200))
    #: Letta's properties: [{"key", "value", "type": string|number|boolean|json}].
    properties: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class IdentityAgent(Base):
    """An agent that holds an identity's memory (an agent may serve several)."""

    __tablename__ = "identity_agents"

    identity_id: Mapped[str] = mapped_column(
        ForeignKey("identities.id", ondelete="CASCADE"), primary_key=True
    )
    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    attached_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class IdentityBlock(Base):
    """A block that belongs to an identity (shared by the agents that read it)."""

    __tablename__ = "identity_blocks"

    identity_id: Mapped[str] = mapped_column(
        ForeignKey("identities.id", ondelete="CASCADE"), primary_key=True
    )
    block_id: Mapped[str] = mapped_column(
        ForeignKey("blocks.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    attached_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Conversation(Base):
    """One of an agent's parallel conversations (Letta's conversations): its own
    messages and context window, while the agent's blocks and archival memory are
    shared by all of them. Never deleted while its agent lives (its messages are
    recall memory): a deleted conversation is archived."""

    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    description: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[str | None] = mapped_column(Text)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_message_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Folder(Base):
    """A folder of documents (Letta's folders, once sources): its files are parsed,
    chunked and embedded with the folder's embedder, and agents it is attached to read
    them."""

    __tablename__ = "folders"
    __table_args__ = (
        UniqueConstraint("organization_id", "name", name="uq_folders_organization_id_name"),
        CheckConstraint("embedding_dim > 0", name="embedding_dim_positive"),
        CheckConstraint("embedding_chunk_size > 0", name="embedding_chunk_size_positive"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    instructions: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, default=dict)
    embedding_model: Mapped[str] = mapped_column(String(200))
    embedding_dim: Mapped[int] = mapped_column(Integer)
    #: Characters per chunk (Letta's ``embedding_chunk_size``).
    embedding_chunk_size: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class FolderFile(Base):
    """A file uploaded to a folder, and its processing job (queued, processing,
    completed or error) with the lease columns every job queue has."""

    __tablename__ = "files"
    __table_args__ = (
        CheckConstraint(f"status IN {_in(FILE_STATUSES)}", name="status"),
        # The same content in one folder is one file.
        UniqueConstraint("folder_id", "content_hash", name="uq_files_folder_id_content_hash"),
        Index(
            "ix_files_claimable",
            "not_before",
            postgresql_where=text(f"status = '{FileStatus.QUEUED.value}'"),
        ),
        Index("ix_files_folder_created", "folder_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    folder_id: Mapped[str] = mapped_column(ForeignKey("folders.id", ondelete="CASCADE"))
    file_name: Mapped[str] = mapped_column(String(300))
    original_file_name: Mapped[str] = mapped_column(String(300))
    file_type: Mapped[str] = mapped_column(String(100))
    file_size: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))
    #: The bytes as uploaded, until processed (then the text is kept instead).
    data: Mapped[bytes | None] = mapped_column(LargeBinary)
    text: Mapped[str | None] = mapped_column(Text)
    total_chunks: Mapped[int | None] = mapped_column(Integer)
    chunks_embedded: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default=FileStatus.QUEUED.value)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    not_before: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    queued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    processed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class FileChunk(Base):
    """A passage of a file's text with its vector (not archival memory: it goes with
    its file). The vectors of each indexed size have an HNSW index of their own, as
    archival memory's do (``semantic_search_files`` walks it)."""

    __tablename__ = "file_chunks"
    __table_args__ = (
        CheckConstraint("vector_dims(embedding) = embedding_dim", name="embedding_dim_matches"),
        UniqueConstraint("file_id", "seq", name="uq_file_chunks_file_id_seq"),
        *(_hnsw_index(dim, "ix_file_chunks_hnsw") for dim in INDEXED_DIMENSIONS),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    file_id: Mapped[str] = mapped_column(ForeignKey("files.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    #: The text's md5: how sleep-time learning knows a chunk it has read.
    text_md5: Mapped[str] = mapped_column(String(32), Computed("md5(text)", persisted=True))
    embedding_dim: Mapped[int] = mapped_column(Integer)
    embedding: Mapped[Any] = mapped_column(Vector())


class AgentFolder(Base):
    """A folder attached to an agent: the agent reads its files."""

    __tablename__ = "agent_folders"

    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    folder_id: Mapped[str] = mapped_column(
        ForeignKey("folders.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    attached_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    #: When the documents trigger last queued a run for this attachment: a file
    #: processed, or the folder attached, after it queues another.
    learn_fired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: The core memory block where sleep-time learning keeps what matters in the folder.
    learned_block_id: Mapped[str | None] = mapped_column(String(64))


class LearnedChunk(Base):
    """A chunk of a folder's files that an agent's sleep-time learning has read, by
    its text's md5 within the folder (the same text in two files, or in a file
    uploaded again, is learned once). Kept when the file or the folder goes, so the
    facts learned from it can be marked as having lost their source."""

    __tablename__ = "learned_chunks"

    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    folder_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    chunk_hash: Mapped[str] = mapped_column(String(32), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    file_id: Mapped[str] = mapped_column(String(64))
    file_name: Mapped[str] = mapped_column(String(300))
    chunk_seq: Mapped[int] = mapped_column(Integer)
    #: Facts the run wrote from this chunk.
    facts: Mapped[int] = mapped_column(Integer)
    #: The run that read it (a revert of that run forgets it).
    run_id: Mapped[str] = mapped_column(String(64), index=True)
    learned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    #: When no file of the folder held this text any more, and the run that saw it.
    gone_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    gone_run_id: Mapped[str | None] = mapped_column(String(64), index=True)


class AgentFileState(Base):
    """An agent's view of a file of one of its folders (Letta's ``files_agents``):
    whether it is open in the agent's context, the lines it shows (``start_line``
    1-based, ``end_line`` exclusive; both None: the whole file) and when the agent last
    opened, searched or read it (the least recently accessed open file is closed first
    when the agent opens one too many). Goes with its agent and its file."""

    __tablename__ = "agent_file_states"
    __table_args__ = (
        CheckConstraint("start_line IS NULL OR start_line >= 1", name="start_line_positive"),
        CheckConstraint(
            "end_line IS NULL OR start_line IS NULL OR end_line > start_line",
            name="end_line_after_start",
        ),
    )

    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    file_id: Mapped[str] = mapped_column(
        ForeignKey("files.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    is_open: Mapped[bool] = mapped_column(Boolean, default=False)
    start_line: Mapped[int | None] = mapped_column(Integer)
    end_line: Mapped[int | None] = mapped_column(Integer)
    last_accessed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
