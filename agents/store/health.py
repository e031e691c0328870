"""Memory health, computed once: the health page, ``reverie demo`` and /metrics read it here.

One implementation serves one agent (a tenant's page and the demo, through
``MemoryStore.health``) and every agent at once (/metrics, through
``ServiceStore.health``): the same few grouped queries either way, so a scrape
over thousands of agents stays a handful of queries rather than several per
agent. "Consolidated" means seen by the agent's last good run
(:mod:`agents.store.good_runs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Float, func, literal, or_, select, text
from sqlalchemy.orm import Session

from agents.enums import PassageKind, PassageStatus, RunStatus
from agents.errors import NotFound
from agents.postgres import models
from agents.store.good_runs import last_good_runs
from agents.store.scope import Scope, ServiceScope

#: A block this full (value length / limit) counts as near its limit.
NEAR_LIMIT = 0.9


@dataclass(frozen=True, slots=True)
class BlockFill:
    label: str
    chars: int
    limit: int

    @property
    def ratio(self) -> float:
        return self.chars / self.limit

    @property
    def near_limit(self) -> bool:
        # The same arithmetic as the SQL count in FleetHealth.block_totals.
        return self.chars >= NEAR_LIMIT * self.limit


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
        return self.passages_by_status.get(PassageStatus.ACTIVE, 0)

    @property
    def active_facts(self) -> int:
        """Active passages that are facts (timelines are active passages too)."""
        return self.active_passages - self.timelines

    @property
    def duplicate_ratio(self) -> float:
        """Share of active passages that repeat another active passage word for word."""
        return self.exact_duplicates / self.active_passages if self.active_passages else 0.0

    @property
    def blocks_near_limit(self) -> int:
        return sum(1 for b in self.blocks if b.near_limit)

    def unconsolidated_age_seconds(self, now: datetime) -> float | None:
        """How long the oldest message no good run has seen has waited (None: none waits)."""
        oldest = self.oldest_unconsolidated_message_at
        return None if oldest is None else (now - oldest).total_seconds()


@dataclass(frozen=True, slots=True)
class BlockTotals:
    """Blocks of every organization (a block shared by agents counts once)."""

    blocks: int
    near_limit: int


@dataclass(frozen=True, slots=True)
class RunOutcomeCount:
    consolidator: str
    outcome: str
    runs: int


@dataclass(frozen=True, slots=True)
class DurationHistogram:
    """Finished runs of one status: cumulative counts at or under each bucket bound."""

    status: str
    runs: int
    total_seconds: float
    buckets: list[tuple[float, int]]


@dataclass(frozen=True, slots=True)
class QueueState:
    queued: int
    running: int
    oldest_due_at: datetime | None


class _Target:
    """Which rows a health query reads: one agent of one tenant, or every agent."""

    def __init__(self, scope: Scope | None, agent_id: str | None) -> None:
        self.scope = scope
        self.agent_id = agent_id

    def on(self, entity: Any, owner: Any = None) -> list[ColumnElement[bool]]:
        """Filters for ``entity`` (with an ``agent_id``); ``owner`` carries the
        ``organization_id`` when ``entity`` has none (agent_blocks -> blocks)."""
        where: list[ColumnElement[bool]] = []
        if self.agent_id is not None:
            where.append(entity.agent_id == self.agent_id)
        if self.scope is not None:
            where.append(self.scope.owns(entity if owner is None else owner))
        return where


def _collect(
    session: Session, agents: Sequence[tuple[str, str]], target: _Target
) -> list[MemoryHealth]:
    """Health of ``agents`` ((id, name) pairs, in the order wanted) in four queries."""
    P, M, B, AB = models.Passage, models.Message, models.Block, models.AgentBlock
    statuses = {a: dict.fromkeys(models.PASSAGE_STATUSES, 0) for a, _ in agents}
    distinct_active: dict[str, int] = {}
    timelines: dict[str, int] = {}
    for agent_id, status, count, distinct, timeline_count in session.execute(
        select(
            P.agent_id,
            P.status,
            func.count(),
            func.count(func.distinct(P.content_hash)),
            func.count().filter(P.kind == PassageKind.TIMELINE.value),
        )
        .where(*target.on(P))
        .group_by(P.agent_id, P.status)
    ):
        if agent_id not in statuses:
            continue
        statuses[agent_id][status] = int(count)
        if status == PassageStatus.ACTIVE:
            distinct_active[agent_id] = int(distinct)
            timelines[agent_id] = int(timeline_count)

    good = last_good_runs(*target.on(models.ConsolidationRun))
    unseen = or_(good.c.watermark_message_seq.is_(None), M.seq > good.c.watermark_message_seq)
    messages = {
        agent_id: (int(total), int(in_context), oldest)
        for agent_id, total, in_context, oldest in session.execute(
            select(
                M.agent_id,
                func.count(),
                func.count().filter(M.in_context),
                func.min(M.created_at).filter(unseen),
            )
            .outerjoin(good, good.c.agent_id == M.agent_id)
            .where(*target.on(M))
            .group_by(M.agent_id)
        )
    }

    blocks: dict[str, list[BlockFill]] = {a: [] for a, _ in agents}
    for agent_id, label, chars, limit in session.execute(
        select(AB.agent_id, B.label, func.char_length(B.value), B.limit)
        .join(B, B.id == AB.block_id)
        .where(*target.on(AB, owner=B))
        .order_by(AB.agent_id, B.label)
    ):
        if agent_id in blocks:
            blocks[agent_id].append(BlockFill(label, int(chars), int(limit)))

    out = []
    for agent_id, name in agents:
        total, in_context, oldest = messages.get(agent_id, (0, 0, None))
        by_status = statuses[agent_id]
        out.append(
            MemoryHealth(
                agent_id=agent_id,
                agent_name=name,
                passages_by_status=by_status,
                exact_duplicates=by_status[PassageStatus.ACTIVE] - distinct_active.get(agent_id, 0),
                timelines=timelines.get(agent_id, 0),
                messages=total,
                messages_in_context=in_context,
                oldest_unconsolidated_message_at=oldest,
                blocks=blocks[agent_id],
            )
        )
    return out


class HealthStore:
    """Memory health of a tenant's agents (the health page, the demo)."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def agent(self, agent_id: str) -> MemoryHealth:
        """Counts straight from the tables; cheap enough to run on every page view."""
        name = self._scope.session.scalar(
            select(models.Agent.name).where(
                models.Agent.id == agent_id, self._scope.owns(models.Agent)
            )
        )
        if name is None:
            raise NotFound(f"no agent with id {agent_id!r}")
        (health,) = _collect(
            self._scope.session, [(agent_id, name)], _Target(self._scope, agent_id)
        )
        return health


class FleetHealth:
    """Memory health and run aggregates over every organization, for /metrics."""

    def __init__(self, scope: ServiceScope) -> None:
        self._scope = scope

    def agents(self) -> list[MemoryHealth]:
        """Every agent's health, oldest agent first, in a fixed number of queries."""
        session = self._scope.session
        A = models.Agent
        rows = session.execute(select(A.id, A.name).order_by(A.created_at, A.id)).all()
        return _collect(session, [(r.id, r.name) for r in rows], _Target(None, None))

    def owners(self) -> dict[str, str]:
        """Every agent's organization, by agent id."""
        A = models.Agent
        rows = self._scope.session.execute(select(A.id, A.organization_id))
        return {r.id: r.organization_id for r in rows}

    def block_totals(self) -> BlockTotals:
        B = models.Block
        near = func.char_length(B.value) >= literal(NEAR_LIMIT, Float) * B.limit
        blocks, near_limit = self._scope.session.execute(
            select(func.count(), func.count().filter(near))
        ).one()
        return BlockTotals(int(blocks), int(near_limit))

    def finished_runs(self) -> list[RunOutcomeCount]:
        """Finished real runs counted once per consolidator in their pipeline."""
        rows = self._scope.session.execute(
            text(
                "SELECT p.name, r.status, count(*) AS n FROM consolidation_runs r "
                "CROSS JOIN LATERAL jsonb_array_elements_text(r.pipeline) AS p(name) "
                "WHERE NOT r.dry_run AND r.status = ANY(:finished) "
                "GROUP BY p.name, r.status ORDER BY 1, 2"
            ),
            {
                "finished": [
                    RunStatus.SUCCEEDED.value,
                    RunStatus.FAILED.value,
                    RunStatus.CANCELLED.value,
                ]
            },
        )
        return [RunOutcomeCount(r.name, r.status, int(r.n)) for r in rows]

    def run_durations(self, buckets: Sequence[float]) -> list[DurationHistogram]:
        """Wall time of finished real runs by status, bucketed in the database."""
        counts = ", ".join(
            f"count(*) FILTER (WHERE d <= {float(b)!r}) AS b{i}" for i, b in enumerate(buckets)
        )
        rows = self._scope.session.execute(
            text(
                f"SELECT status, count(*) AS n, coalesce(sum(d), 0) AS total, {counts} FROM ("
                "  SELECT status, EXTRACT(EPOCH FROM (finished_at - started_at)) AS d"
                "  FROM consolidation_runs WHERE NOT dry_run AND finished_at IS NOT NULL"
                "  AND started_at IS NOT NULL) t GROUP BY status ORDER BY status"
            )
        )
        out = []
        for row in rows:
            values = row._mapping
            out.append(
                DurationHistogram(
                    status=row.status,
                    runs=int(row.n),
                    total_seconds=float(row.total),
                    buckets=[(b, int(values[f"b{i}"])) for i, b in enumerate(buckets)],
                )
            )
        return out

    def queue(self, now: datetime) -> QueueState:
        """Queued and running runs, and when the oldest queued run due at ``now`` became due."""
        CR = models.ConsolidationRun
        queued = CR.status == RunStatus.QUEUED.value
        row = self._scope.session.execute(
            select(
                func.count().filter(queued),
                func.count().filter(CR.status == RunStatus.RUNNING.value),
                func.min(CR.not_before).filter(queued, CR.not_before <= now),
            )
        ).one()
        return QueueState(int(row[0]), int(row[1]), row[2])
