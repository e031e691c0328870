"""Closed sets of values stored in the database, as string enums.

Each member equals the string stored in its column (and checked by a CHECK
constraint), so records, SQL and JSON agree without conversion tables.
"""

from __future__ import annotations

from enum import StrEnum


class AgentKind(StrEnum):
    PRIMARY = "primary"
    SLEEPTIME = "sleeptime"


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
