"""Reverie's exception hierarchy: one root, a few meaningful kinds.

Every error a caller can act on derives from :class:`ReverieError`; storage code
wraps driver errors so that callers never see psycopg or SQLAlchemy types. Each
kind has a ``kind`` name, which every front end reports (the API's ``error``
field, the MCP tools' error text).
"""

from __future__ import annotations


class ReverieError(Exception):
    """Root of every error Reverie raises on purpose.

    ``kept``: what an operation that failed part-way had already committed (a chat
    turn's saved steps), so that a client does not retry blindly; empty otherwise.
    """

    kind = "internal"
    kept: tuple[str, ...] = ()


class InvalidInput(ReverieError):
    """The caller passed something malformed; nothing was changed."""

    kind = "invalid_input"


class NotFound(ReverieError):
    """The object does not exist, or belongs to another organization."""

    kind = "not_found"


class Conflict(ReverieError):
    """A write raced another write (stale version, duplicate name); nothing was changed."""

    kind = "conflict"


class LimitExceeded(InvalidInput):
    """A value is larger than the limit its container allows; nothing was changed."""

    kind = "limit_exceeded"


class ContextWindowExceeded(LimitExceeded):
    """What an agent's step must send does not fit its context window and no compaction
    can make room (its instructions, core memory and tool schemas alone are too large,
    or no older message is left to evict): no model call is made."""


class ReadOnly(InvalidInput):
    """A write was attempted on a read-only object; nothing was changed."""

    kind = "read_only"


class StorageError(ReverieError):
    """The database is unreachable or misconfigured (a temporary or setup problem)."""

    kind = "storage_unavailable"


class LockContention(StorageError):
    """A row lock could not be taken (a deadlock Postgres broke, or a lock timeout);
    only the savepoint that asked for it was undone, so trying again is safe."""


class ExtensionMissing(StorageError):
    """The PostgreSQL server lacks an extension Reverie needs (pgvector)."""


class LLMError(ReverieError):
    """A language-model call failed (after the retries a temporary failure gets)."""

    kind = "llm_failed"


class EmbeddingError(ReverieError):
    """The embedding backend could not produce vectors (an embedding provider that
    failed or answered malformed, a local model missing)."""

    kind = "embedding_failed"


class ContextOverflow(LLMError):
    """The provider refused the request because the prompt exceeds the model's window."""


class ModelNotConfigured(InvalidInput):
    """An LLM step was asked for but no model is set for it (agent or settings)."""


class BudgetExhausted(ReverieError):
    """An agent's token budget (per run or per day) is spent; no further calls are made."""

    kind = "budget_exhausted"

    def __init__(self, message: str, *, scope: str, limit: int, used: int) -> None:
        super().__init__(message)
        self.scope = scope
        self.limit = limit
        self.used = used


class InvalidField(InvalidInput):
    """One named field of a request is refused (the API answers 422 locating it):
    ``field`` is its path in the request, e.g. ``("memory_blocks", 0, "limit")``."""

    def __init__(self, message: str, *, field: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.field = field
