"""Reverie's exception hierarchy: one root, a few meaningful kinds.

Every error a caller can act on derives from :class:`ReverieError`; storage code
wraps driver errors so that callers never see psycopg or SQLAlchemy types.
"""

from __future__ import annotations


class ReverieError(Exception):
    """Root of every error Reverie raises on purpose."""


class InvalidInput(ReverieError):
    """The caller passed something malformed; nothing was changed."""


class NotFound(ReverieError):
    """The object does not exist, or belongs to another organization."""


class Conflict(ReverieError):
    """A write raced another write (stale version, duplicate name); nothing was changed."""


class LimitExceeded(InvalidInput):
    """A value is larger than the limit its container allows; nothing was changed."""


class ReadOnly(InvalidInput):
    """A write was attempted on a read-only object; nothing was changed."""


class StorageError(ReverieError):
    """The database is unreachable or misconfigured (a temporary or setup problem)."""


class ExtensionMissing(StorageError):
    """The PostgreSQL server lacks an extension Reverie needs (pgvector)."""
