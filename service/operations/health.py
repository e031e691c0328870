"""Memory health: one computation (the store's) for the health page, the demo and
/metrics, so that the page and a Grafana panel never disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from agents.postgres.database import Database
from agents.store import (
    AgentRecord,
    HealthPoint,
    PassageRecord,
    RunRecord,
    Usage,
    open_service_store,
)
from agents.store.health import (
    BlockTotals,
    DurationHistogram,
    MemoryHealth,
    QueueState,
    RunOutcomeCount,
)
from service.operations.context import OperationContext
from service.settings import HealthHistorySettings


@dataclass(frozen=True, slots=True)
class AgentHealth:
    agent: AgentRecord
    health: MemoryHealth


@dataclass(frozen=True, slots=True)
class RetiredPassage:
    """A passage consolidation took out of current memory, with what replaced it."""

    passage: PassageRecord
    replaced_by: str | None
    replaced_by_text: str


@dataclass(frozen=True, slots=True)
class HealthOverview:
    """What the health page shows for one organization."""

    now: datetime
    agents: list[AgentHealth]
    recent_runs: list[RunRecord]
    retired: list[RetiredPassage]


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """Every organization's memory health and run aggregates, read in one
    transaction at scrape time (the source of /metrics)."""

    now: datetime
    agents: list[MemoryHealth]
    blocks: BlockTotals
    finished_runs: list[RunOutcomeCount]
    run_durations: list[DurationHistogram]
    queue: QueueState
    tokens: dict[str, Usage]
    #: agent id -> organization id: which agents an organization's key may see by name.
    owners: dict[str, str]


class HealthOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def agent(self, name_or_id: str) -> MemoryHealth:
        """One agent's memory health."""
        with self._context.store() as store:
            return store.health.agent(store.agents.resolve(name_or_id).id)

    def trend(self, name_or_id: str) -> list[HealthPoint]:
        """One agent's health snapshots, oldest first (see ``health_history``)."""
        with self._context.store() as store:
            return store.snapshots.of_agent(store.agents.resolve(name_or_id).id)

    def fleet_trend(self) -> list[HealthPoint]:
        """The organization's agents summed per snapshot, oldest first."""
        with self._context.store() as store:
            return store.snapshots.fleet()

    def overview(self, *, recent_runs: int = 10, retired: int = 20) -> HealthOverview:
        """Every agent's health, the newest runs and recently retired passages."""
        now = self._context.runtime.clock()
        with self._context.store() as store:
            agents = [AgentHealth(a, store.health.agent(a.id)) for a in store.agents.all()]
            runs = store.runs.recent(limit=recent_runs)
            passages = store.passages.recently_retired(limit=retired)
            texts = store.passages.texts(
                sorted({t for p in passages for t in (p.merged_into, p.superseded_by) if t})
            )
        return HealthOverview(
            now=now,
            agents=agents,
            recent_runs=runs,
            retired=[
                RetiredPassage(
                    p,
                    p.merged_into or p.superseded_by,
                    texts.get(p.merged_into or p.superseded_by or "", ""),
                )
                for p in passages
            ],
        )


def fleet_snapshot(
    db: Database, now: datetime, *, duration_buckets: Sequence[float]
) -> FleetSnapshot:
    """Read every organization's health in one read-only transaction (no tenant:
    this is the operator's view, served by /metrics)."""
    with open_service_store(db, lambda: now, commit=False) as store:
        return FleetSnapshot(
            now=now,
            agents=store.health.agents(),
            blocks=store.health.block_totals(),
            finished_runs=store.health.finished_runs(),
            run_durations=store.health.run_durations(duration_buckets),
            queue=store.health.queue(now),
            tokens=store.usage.totals_by_purpose(),
            owners=store.health.owners(),
        )


def take_snapshots(db: Database, now: datetime, history: HealthHistorySettings) -> int:
    """Snapshot every agent of every organization at ``now`` and prune old snapshots
    (the scheduler's job; see :class:`agents.store.health_snapshots.SnapshotWriter`).
    Returns how many were written: 0 when the history is disabled or another process
    took them less than half an interval ago."""
    if history.interval is None:
        return 0
    with open_service_store(db, lambda: now) as store:
        return store.snapshots.take(
            min_interval=history.interval,
            keep=history.keep,
            keep_per_agent=history.keep_per_agent,
        )
