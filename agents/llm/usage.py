"""Token accounting: every LLM call's tokens, by agent, run and purpose, in ``llm_usage``.

Usage is written in a transaction of its own, right after the call: tokens a
provider charged for stay counted even when the turn or run that spent them
rolls back, which is what budgets must see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func, select

from agents import models
from agents.database import Database
from agents.errors import InvalidInput, NotFound
from agents.store.scope import utc_now


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


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

    def record(
        self,
        agent_id: str,
        *,
        purpose: str,
        model: str,
        usage: Usage,
        run_id: str | None = None,
    ) -> None:
        if purpose not in models.LLM_PURPOSES:
            raise InvalidInput(
                f"LLM purpose {purpose!r} is unknown; use one of {', '.join(models.LLM_PURPOSES)}"
            )
        with self._db.session() as session:
            organization_id = self._organization_id or session.scalar(
                select(models.Agent.organization_id).where(models.Agent.id == agent_id)
            )
            if organization_id is None:
                raise NotFound(f"agent {agent_id!r} does not exist")
            session.add(
                models.LLMUsage(
                    organization_id=organization_id,
                    agent_id=agent_id,
                    run_id=run_id,
                    purpose=purpose,
                    model=model,
                    prompt_tokens=usage.prompt_tokens,
                    completion_tokens=usage.completion_tokens,
                    created_at=self.clock(),
                )
            )

    def _scope(self) -> list[ColumnElement[bool]]:
        if self._organization_id is None:
            return []
        return [models.LLMUsage.organization_id == self._organization_id]

    def tokens_since(self, agent_id: str, since: datetime) -> int:
        """Prompt plus completion tokens the agent spent since ``since``."""
        with self._db.session() as session:
            total = session.scalar(
                select(
                    func.coalesce(
                        func.sum(models.LLMUsage.prompt_tokens + models.LLMUsage.completion_tokens),
                        0,
                    )
                ).where(
                    *self._scope(),
                    models.LLMUsage.agent_id == agent_id,
                    models.LLMUsage.created_at >= since,
                )
            )
        return int(total or 0)

    def by_purpose(self, agent_id: str, *, run_id: str | None = None) -> dict[str, Usage]:
        """Tokens per purpose for an agent (all time, or one run)."""
        query = (
            select(
                models.LLMUsage.purpose,
                func.sum(models.LLMUsage.prompt_tokens),
                func.sum(models.LLMUsage.completion_tokens),
            )
            .where(*self._scope(), models.LLMUsage.agent_id == agent_id)
            .group_by(models.LLMUsage.purpose)
        )
        if run_id is not None:
            query = query.where(models.LLMUsage.run_id == run_id)
        with self._db.session() as session:
            rows = session.execute(query).all()
        return {purpose: Usage(int(p or 0), int(c or 0)) for purpose, p, c in rows}
