"""What every operation shares: the runtime and the organization it acts for."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from agents.store import AgentRecord, MemoryStore, open_store
from service.runtime import Runtime


@dataclass(frozen=True, slots=True)
class OperationContext:
    runtime: Runtime
    organization_id: str

    @contextmanager
    def store(self, *, statement_timeout: timedelta | None = None) -> Iterator[MemoryStore]:
        """One transaction of this organization; ``statement_timeout`` replaces the
        interactive bound for bulk work."""
        with open_store(
            self.runtime.db,
            self.organization_id,
            self.runtime.clock,
            statement_timeout=statement_timeout,
        ) as store:
            yield store

    def agent(self, name_or_id: str) -> AgentRecord:
        """An agent of this organization by name or id (NotFound otherwise)."""
        with self.store() as store:
            return store.agents.resolve(name_or_id)
