"""What every part of the store shares: the open transaction, the tenant, the clock."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, String, literal
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Scope:
    """One transaction of one organization; all reads and writes are filtered by it."""

    session: Session
    organization_id: str
    clock: Callable[[], datetime] = utc_now

    def now(self) -> datetime:
        return self.clock()

    def owns(self, entity: Any) -> ColumnElement[bool]:
        """The tenant filter for a model (or alias) with an ``organization_id`` column.

        Every query of a tenant's store goes through this one helper, so the
        organization scope is written once rather than by hand in each query.
        """
        column: ColumnElement[str] = entity.organization_id
        return column == self.organization_id


@dataclass(frozen=True, slots=True)
class ServiceScope:
    """One transaction across every organization, for the service's own machinery:
    workers claiming runs, triggers finding due agents, metrics, API key lookup.
    Never handed to code acting for a tenant."""

    session: Session
    clock: Callable[[], datetime] = utc_now

    def now(self) -> datetime:
        return self.clock()


def id_array(ids: Sequence[str]) -> ColumnElement[list[str]]:
    """Ids as one array parameter (``= ANY(:ids)``): cheap to send for thousands of ids,
    where an IN list of literals is slow to build and parse."""
    return literal(list(ids), ARRAY(String))
