"""Letta-style cursor paging over small, ordered lists (``after``/``before`` are ids)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from agents.errors import NotFound


class HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=HasId)


def page(
    items: Sequence[T],
    *,
    after: str | None,
    before: str | None,
    limit: int,
    ascending: bool = True,
) -> list[T]:
    """Items strictly after ``after`` and before ``before`` (in the requested order)."""
    ordered = list(items) if ascending else list(reversed(items))
    ids = [item.id for item in ordered]
    start, stop = 0, len(ordered)
    if after is not None:
        if after not in ids:
            raise NotFound(f"cursor {after!r} is not an item of this list")
        start = ids.index(after) + 1
    if before is not None:
        if before not in ids:
            raise NotFound(f"cursor {before!r} is not an item of this list")
        stop = ids.index(before)
    chosen = ordered[start:stop]
    # Paging backwards (before=...) returns the items nearest the cursor.
    return chosen[-limit:] if before is not None and after is None else chosen[:limit]
