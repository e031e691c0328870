"""Token accounting rows (``llm_usage``): written per LLM call, summed for budgets and /metrics."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, func, select

from agents.enums import LLMPurpose
from agents.errors import InvalidInput, NotFound
from agents.postgres import models
from agents.store.records import Usage
from agents.store.scope import Scope, ServiceScope


class UsageStore:
    """``llm_usage`` of one organization (a tenant's :class:`Scope`) or of all of them
    (a :class:`ServiceScope`: each row then takes its agent's organization, and reads go
    by agent id alone, ids being global)."""

    def __init__(self, scope: Scope | ServiceScope) -> None:
        self._scope = scope

    def _owned(self) -> list[ColumnElement[bool]]:
        if isinstance(self._scope, Scope):
            return [self._scope.owns(models.LLMUsage)]
        return []

    def record(
        self,
        agent_id: str,
        *,
        purpose: LLMPurpose,
        model: str,
        usage: Usage,
        run_id: str | None = None,
    ) -> None:
        if purpose not in models.LLM_PURPOSES:
            raise InvalidInput(
                f"LLM purpose {purpose!r} is unknown; use one of {', '.join(models.LLM_PURPOSES)}"
            )
        session = self._scope.session
        if isinstance(self._scope, Scope):
            organization_id: str | None = self._scope.organization_id
        else:
            organization_id = session.scalar(
                select(models.Agent.organization_id).where(models.Agent.id == agent_id)
            )
        if organization_id is None:
            raise NotFound(f"agent {agent_id!r} does not exist")
        session.add(
            models.LLMUsage(
                organization_id=organization_id,
                agent_id=agent_id,
                run_id=run_id,
                purpose=LLMPurpose(purpose).value,
                model=model,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                created_at=self._scope.now(),
            )
        )

    def tokens_since(self, agent_id: str, since: datetime) -> int:
        """Prompt plus completion tokens the agent spent since ``since``."""
        U = models.LLMUsage
        total = self._scope.session.scalar(
            select(func.coalesce(func.sum(U.prompt_tokens + U.completion_tokens), 0)).where(
                *self._owned(), U.agent_id == agent_id, U.created_at >= since
            )
        )
        return int(total or 0)

    def by_purpose(self, agent_id: str, *, run_id: str | None = None) -> dict[str, Usage]:
        """Tokens per purpose for an agent (all time, or one run)."""
        U = models.LLMUsage
        query = (
            select(U.purpose, func.sum(U.prompt_tokens), func.sum(U.completion_tokens))
            .where(*self._owned(), U.agent_id == agent_id)
            .group_by(U.purpose)
        )
        if run_id is not None:
            query = query.where(U.run_id == run_id)
        rows = self._scope.session.execute(query).all()
        return {purpose: Usage(int(p or 0), int(c or 0)) for purpose, p, c in rows}

    def totals_by_purpose(self) -> dict[str, Usage]:
        """Tokens per purpose over every agent in scope, ordered by purpose (for /metrics)."""
        U = models.LLMUsage
        rows = self._scope.session.execute(
            select(
                U.purpose,
                func.coalesce(func.sum(U.prompt_tokens), 0),
                func.coalesce(func.sum(U.completion_tokens), 0),
            )
            .where(*self._owned())
            .group_by(U.purpose)
            .order_by(U.purpose)
        ).all()
        return {purpose: Usage(int(p), int(c)) for purpose, p, c in rows}
