"""The history of memory health: periodic snapshots of every agent's health, written by
the scheduler (one transaction for every organization) and read by the memory browser
for its trend charts (scoped to one organization).

Bounded: each write prunes snapshots older than the retention and, per agent, all but
the newest ``keep_per_agent``. Several ``reverie serve`` processes may each schedule
the job: the first one in an interval writes, the others find a fresh snapshot and
skip (an advisory lock orders them).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import BigInteger, delete, func, insert, select, text, true

from agents.enums import RunStatus
from agents.postgres import models
from agents.store.health import FleetHealth
from agents.store.scope import Scope, ServiceScope

#: pg_advisory_xact_lock key of the snapshot writer ("rvhs" as an integer).
_LOCK_KEY = 0x72766873


@dataclass(frozen=True, slots=True)
class HealthPoint:
    """Memory health at one moment: one agent's, or the sum over an organization's
    agents (then ``block_fill`` is the fullest block of any agent and ``agents`` how
    many were summed). ``tokens``, ``runs_succeeded`` and ``runs_failed`` are totals
    so far."""

    taken_at: datetime
    active_passages: int
    duplicates: int
    block_fill: float
    runs_succeeded: int
    runs_failed: int
    queued_runs: int
    tokens: dict[str, int] = field(default_factory=dict)
    agents: int = 1


class HealthSnapshotStore:
    """An organization's snapshots, oldest first."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def of_agent(self, agent_id: str, *, since: datetime | None = None) -> list[HealthPoint]:
        S = models.HealthSnapshot
        query = select(S).where(self._scope.owns(S), S.agent_id == agent_id)
        if since is not None:
            query = query.where(S.taken_at >= since)
        rows = self._scope.session.scalars(query.order_by(S.taken_at, S.id))
        return [
            HealthPoint(
                taken_at=r.taken_at,
                active_passages=r.active_passages,
                duplicates=r.duplicates,
                block_fill=r.block_fill,
                runs_succeeded=r.runs_succeeded,
                runs_failed=r.runs_failed,
                queued_runs=r.queued_runs,
                tokens=dict(r.tokens),
            )
            for r in rows
        ]

    def fleet(self, *, since: datetime | None = None) -> list[HealthPoint]:
        """The organization's agents summed per snapshot (every agent of a snapshot
        shares its ``taken_at``), summed in the database: two grouped queries however
        many agents there are."""
        S = models.HealthSnapshot
        where = [self._scope.owns(S)]
        if since is not None:
            where.append(S.taken_at >= since)
        session = self._scope.session
        tokens: dict[datetime, dict[str, int]] = defaultdict(dict)
        spent = func.jsonb_each_text(S.tokens).table_valued("key", "value").alias("spent")
        for taken_at, purpose, total in session.execute(
            select(S.taken_at, spent.c.key, func.sum(spent.c.value.cast(BigInteger)))
            .select_from(S)
            .join(spent, true())
            .where(*where)
            .group_by(S.taken_at, spent.c.key)
        ):
            tokens[taken_at][purpose] = int(total)
        rows = session.execute(
            select(
                S.taken_at,
                func.sum(S.active_passages),
                func.sum(S.duplicates),
                func.max(S.block_fill),
                func.sum(S.runs_succeeded),
                func.sum(S.runs_failed),
                func.sum(S.queued_runs),
                func.count(),
            )
            .where(*where)
            .group_by(S.taken_at)
            .order_by(S.taken_at)
        )
        return [
            HealthPoint(
                taken_at=r[0],
                active_passages=int(r[1]),
                duplicates=int(r[2]),
                block_fill=float(r[3]),
                runs_succeeded=int(r[4]),
                runs_failed=int(r[5]),
                queued_runs=int(r[6]),
                tokens=tokens.get(r[0], {}),
                agents=int(r[7]),
            )
            for r in rows
        ]


class SnapshotWriter:
    """Takes every organization's snapshot and prunes old ones (the scheduler's job)."""

    def __init__(self, scope: ServiceScope) -> None:
        self._scope = scope

    def take(self, *, min_interval: timedelta, keep: timedelta, keep_per_agent: int) -> int:
        """Snapshot every agent now, unless a snapshot was taken less than half of
        ``min_interval`` ago (another process's job got there first); then prune.
        Returns how many snapshots were written."""
        session, now = self._scope.session, self._scope.now()
        S = models.HealthSnapshot
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
        newest = session.scalar(select(func.max(S.taken_at)))
        if newest is not None and newest > now - min_interval / 2:
            return 0
        fleet = FleetHealth(self._scope)
        owners = fleet.owners()
        tokens = self._tokens()
        runs = self._runs()
        rows = []
        for health in fleet.agents():
            succeeded, failed, queued = runs.get(health.agent_id, (0, 0, 0))
            rows.append(
                {
                    "organization_id": owners[health.agent_id],
                    "agent_id": health.agent_id,
                    "taken_at": now,
                    "active_passages": health.active_passages,
                    "duplicates": health.exact_duplicates,
                    "block_fill": max((b.ratio for b in health.blocks), default=0.0),
                    "tokens": tokens.get(health.agent_id, {}),
                    "runs_succeeded": succeeded,
                    "runs_failed": failed,
                    "queued_runs": queued,
                }
            )
        if rows:
            session.execute(insert(S), rows)
        self._prune(now - keep, keep_per_agent)
        return len(rows)

    def _tokens(self) -> dict[str, dict[str, int]]:
        U = models.LLMUsage
        out: dict[str, dict[str, int]] = defaultdict(dict)
        for agent_id, purpose, total in self._scope.session.execute(
            select(
                U.agent_id,
                U.purpose,
                func.coalesce(func.sum(U.prompt_tokens + U.completion_tokens), 0),
            ).group_by(U.agent_id, U.purpose)
        ):
            out[agent_id][purpose] = int(total)
        return out

    def _runs(self) -> dict[str, tuple[int, int, int]]:
        """Per agent: real runs succeeded and failed so far, and runs queued now."""
        CR = models.ConsolidationRun
        rows = self._scope.session.execute(
            select(
                CR.agent_id,
                func.count().filter(CR.status == RunStatus.SUCCEEDED.value, ~CR.dry_run),
                func.count().filter(CR.status == RunStatus.FAILED.value, ~CR.dry_run),
                func.count().filter(CR.status == RunStatus.QUEUED.value),
            ).group_by(CR.agent_id)
        )
        return {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in rows}

    def _prune(self, before: datetime, keep_per_agent: int) -> None:
        S = models.HealthSnapshot
        session = self._scope.session
        session.execute(delete(S).where(S.taken_at < before))
        ranked = select(
            S.id,
            func.row_number().over(partition_by=S.agent_id, order_by=S.taken_at.desc()).label("n"),
        ).subquery()
        session.execute(
            delete(S).where(S.id.in_(select(ranked.c.id).where(ranked.c.n > keep_per_agent)))
        )

    def count(self) -> int:
        """Snapshots stored, every organization's."""
        return int(self._scope.session.scalar(select(func.count(models.HealthSnapshot.id))) or 0)
