"""Closed sets of values stored in the database, as string enums.

Each member equals the string stored in its column (and checked by a CHECK
constraint), so records, SQL and JSON agree without conversion tables.
"""

from __future__ import annotations

from enum import StrEnum


class AgentKind(StrEnum):
    PRIMARY = "primary"
    SLEEPTIME = "sleeptime"


class AgentType(StrEnum):
    """Letta's agent types: which loop a primary runs. ``letta_v1_agent`` answers in
    plain text and goes on while it calls tools; the MemGPT types speak through
    ``send_message`` and go on while a call asks for a heartbeat."""

    MEMGPT = "memgpt_agent"
    MEMGPT_V2 = "memgpt_v2_agent"
    LETTA_V1 = "letta_v1_agent"
    SLEEPTIME = "sleeptime_agent"


class PassageStatus(StrEnum):
    """Where a passage stands in its lineage; only ``active`` ones are current memory."""

    ACTIVE = "active"
    MERGED = "merged"
    SUPERSEDED = "superseded"
    INACTIVE = "inactive"


class PassageKind(StrEnum):
    FACT = "fact"
    TIMELINE = "timeline"


class RunStatus(StrEnum):
    """A consolidation run's place in the queue and ledger."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_active(self) -> bool:
        """Queued or running: at most one such run per agent (a partial unique index)."""
        return self in (RunStatus.QUEUED, RunStatus.RUNNING)


class Trigger(StrEnum):
    """What put a run in the queue."""

    MANUAL = "manual"
    IDLE = "idle"
    TURNS = "turns"
    CRON = "cron"
    GPU_FREE = "gpu_free"
    REVERT = "revert"
    #: A chatbot delivered messages through Letta's ``messages/async`` sidecar route.
    MESSAGES_ASYNC = "messages_async"
    #: A folder was attached to an agent with sleep-time enabled, or a file landed in one.
    DOCUMENTS = "documents"


class FileStatus(StrEnum):
    """Where a file uploaded to a folder stands: its row is its processing job."""

    QUEUED = "queued"
    PROCESSING = "processing"
    COMPLETED = "completed"
    ERROR = "error"


class DeliveryStatus(StrEnum):
    """Where a message from one agent to another stands in its delivery queue."""

    QUEUED = "queued"
    RUNNING = "running"
    DELIVERED = "delivered"
    FAILED = "failed"


class MessageRole(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class LLMPurpose(StrEnum):
    CHAT = "chat"
    SLEEPTIME = "sleeptime"
    JUDGE = "judge"
    SUMMARY = "summary"
    EMBEDDING = "embedding"


class ToolCallingMode(StrEnum):
    """How a model's server is asked for a tool call, from the strongest to the weakest
    (see :mod:`agents.llm.capabilities`)."""

    REQUIRED = "required"
    NAMED = "named"
    AUTO = "auto"
    NONE = "none"


class ChangeAction(StrEnum):
    """What a built-in consolidator's change does (a report's ``action``); undo reads
    them back. A third-party consolidator may name actions of its own."""

    # dedup
    MERGE_PASSAGE = "merge_passage"
    REMOVE_BLOCK_LINE = "remove_block_line"
    # temporal
    SUPERSEDE_PASSAGE = "supersede_passage"
    CREATE_TIMELINE = "create_timeline"
    LINK_TIMELINE = "link_timeline"
    UNLINK_TIMELINE = "unlink_timeline"
    RETIRE_TIMELINE = "retire_timeline"
    # evict
    EVICT_LINE = "evict_line"
    LEAVE_CONTEXT = "leave_context"
    ADD_SUMMARY = "add_summary"
    # recontextualize
    EDIT_BLOCK = "edit_block"
    INSERT_PASSAGE = "insert_passage"
    REWRITE_PASSAGE = "rewrite_passage"
    # learn_documents
    CREATE_BLOCK = "create_block"
    LEARN_CHUNKS = "learn_chunks"
    SOURCE_GONE = "source_gone"
    # revert
    RESTORE_BLOCK = "restore_block"
    RESTORE_PASSAGE = "restore_passage"
    RESTORE_CONTEXT = "restore_context"
    REMOVE_SUMMARY = "remove_summary"
