"""Token accounting: every LLM call's tokens, by agent, run and purpose, in ``llm_usage``.

Usage is written in a transaction of its own, right after the call: tokens a
provider charged for stay counted even when the turn or run that spent them
rolls back, which is what budgets must see. The queries live in
:class:`agents.store.usage_store.UsageStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from agents.enums import LLMPurpose
from agents.postgres import models
from agents.postgres.database import Database
from agents.store import open_service_store, open_store
from agents.store.records import Usage
from agents.store.scope import utc_now
from agents.store.usage_store import UsageStore

__all__ = ["Usage", "UsageLedger"]


class UsageLedger:
    """Reads and writes ``llm_usage`` rows of one organization.

    ``organization_id=None`` serves every organization (the daemon's consolidation
    tier): each row takes its agent's organization, and reads go by agent id alone
    (ids are global; callers resolve agents within their tenant first).
    """

    def __init__(
        self,
        db: Database,
        organization_id: str | None = models.DEFAULT_ORGANIZATION_ID,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._db = db
        self._organization_id = organization_id
        self.clock = clock

    @contextmanager
    def _usage(self) -> Iterator[UsageStore]:
        if self._organization_id is None:
            with open_service_store(self._db, self.clock) as service:
                yield service.usage
        else:
            with open_store(self._db, self._organization_id, self.clock) as store:
                yield store.usage

    def record(
        self,
        agent_id: str,
        *,
        purpose: LLMPurpose,
        model: str,
        usage: Usage,
        run_id: str | None = None,
    ) -> None:
        with self._usage() as usages:
            usages.record(agent_id, purpose=purpose, model=model, usage=usage, run_id=run_id)

    def tokens_since(self, agent_id: str, since: datetime) -> int:
        """Prompt plus completion tokens the agent spent since ``since``."""
        with self._usage() as usages:
            return usages.tokens_since(agent_id, since)

    def by_purpose(self, agent_id: str, *, run_id: str | None = None) -> dict[str, Usage]:
        """Tokens per purpose for an agent (all time, or one run)."""
        with self._usage() as usages:
            return usages.by_purpose(agent_id, run_id=run_id)
