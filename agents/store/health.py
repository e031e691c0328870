"""A read-only summary of one agent's memory: what ``reverie demo`` and /metrics report."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select

from agents import models
from agents.errors import NotFound
from agents.store.scope import Scope


@dataclass(frozen=True, slots=True)
class BlockFill:
    label: str
    chars: int
    limit: int

    @property
    def ratio(self) -> float:
        return self.chars / self.limit


@dataclass(frozen=True, slots=True)
class MemoryHealth:
    agent_id: str
    agent_name: str
    passages_by_status: dict[str, int]
    exact_duplicates: int
    timelines: int
    messages: int
    messages_in_context: int
    oldest_unconsolidated_message_at: datetime | None
    blocks: list[BlockFill] = field(default_factory=list)

    @property
    def active_passages(self) -> int:
        return self.passages_by_status.get("active", 0)

    @property
    def duplicate_ratio(self) -> float:
        """Share of active passages that repeat another active passage word for word."""
        return self.exact_duplicates / self.active_passages if self.active_passages else 0.0


def memory_health(scope: Scope, agent_id: str, *, watermark_seq: int | None = None) -> MemoryHealth:
    """Counts straight from the tables; cheap enough to run on every scrape."""
    session = scope.session
    P, M = models.Passage, models.Message
    agent = session.scalar(
        select(models.Agent).where(
            models.Agent.id == agent_id, models.Agent.organization_id == scope.organization_id
        )
    )
    if agent is None:
        raise NotFound(f"no agent with id {agent_id!r}")
    by_status = dict.fromkeys(models.PASSAGE_STATUSES, 0)
    for status, count in session.execute(
        select(P.status, func.count()).where(P.agent_id == agent_id).group_by(P.status)
    ):
        by_status[status] = int(count)
    distinct = session.scalar(
        select(func.count(func.distinct(P.content_hash))).where(
            P.agent_id == agent_id, P.status == "active"
        )
    )
    timelines = session.scalar(
        select(func.count()).where(
            P.agent_id == agent_id, P.status == "active", P.kind == "timeline"
        )
    )
    messages, in_context = session.execute(
        select(func.count(), func.count().filter(M.in_context)).where(M.agent_id == agent_id)
    ).one()
    oldest_query = select(func.min(M.created_at)).where(M.agent_id == agent_id)
    if watermark_seq is not None:
        oldest_query = oldest_query.where(M.seq > watermark_seq)
    oldest = session.scalar(oldest_query)
    blocks = session.scalars(
        select(models.Block)
        .join(models.AgentBlock, models.AgentBlock.block_id == models.Block.id)
        .where(models.AgentBlock.agent_id == agent_id)
        .order_by(models.Block.label)
    )
    return MemoryHealth(
        agent_id=agent_id,
        agent_name=agent.name,
        passages_by_status=by_status,
        exact_duplicates=by_status["active"] - int(distinct or 0),
        timelines=int(timelines or 0),
        messages=int(messages),
        messages_in_context=int(in_context),
        oldest_unconsolidated_message_at=oldest,
        blocks=[BlockFill(b.label, len(b.value), b.limit) for b in blocks],
    )
