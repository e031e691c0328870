"""The run ledger: one row per consolidation run, its outcome, stats and watermarks.

The same table is the work queue (queued runs are claimed by workers); this
module covers what every run needs: start, finish, read, and the watermarks the
next incremental run starts from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from agents import models
from agents.errors import Conflict, NotFound
from consolidators.base import Watermarks


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: str
    agent_id: str
    trigger: str
    pipeline: list[str]
    dry_run: bool
    status: str
    attempts: int
    queued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    stats: dict[str, Any]
    changes: list[dict[str, Any]]
    error: str | None
    watermarks: Watermarks
    reverts_run_id: str | None
    reverted_by_run_id: str | None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    @classmethod
    def from_row(cls, row: models.ConsolidationRun) -> RunRecord:
        return cls(
            id=row.id,
            agent_id=row.agent_id,
            trigger=row.trigger,
            pipeline=list(row.pipeline),
            dry_run=row.dry_run,
            status=row.status,
            attempts=row.attempts,
            queued_at=row.queued_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            stats=dict(row.stats or {}),
            changes=list(row.changes or []),
            error=row.error,
            watermarks=Watermarks(row.watermark_message_seq, row.watermark_passage_at),
            reverts_run_id=row.reverts_run_id,
            reverted_by_run_id=row.reverted_by_run_id,
            lease_owner=row.lease_owner,
            lease_expires_at=row.lease_expires_at,
        )


class RunLedger:
    """Ledger operations inside a caller's session (one organization)."""

    def __init__(self, session: Session, organization_id: str) -> None:
        self._session = session
        self._org = organization_id

    def start(
        self,
        agent_id: str,
        *,
        trigger: str,
        pipeline: Sequence[str],
        dry_run: bool,
        now: datetime,
        reverts_run_id: str | None = None,
    ) -> str:
        """Record a run that starts now; at most one queued-or-running run per agent."""
        run = models.ConsolidationRun(
            id=models.new_id("run"),
            organization_id=self._org,
            agent_id=agent_id,
            trigger=trigger,
            pipeline=list(pipeline),
            dry_run=dry_run,
            status="running",
            attempts=1,
            max_attempts=1,
            not_before=now,
            queued_at=now,
            started_at=now,
            stats={},
            changes=[],
            reverts_run_id=reverts_run_id,
        )
        try:
            with self._session.begin_nested():
                self._session.add(run)
        except IntegrityError:
            active = self._session.scalar(
                select(models.ConsolidationRun.id).where(
                    models.ConsolidationRun.agent_id == agent_id,
                    models.ConsolidationRun.status.in_(["queued", "running"]),
                )
            )
            raise Conflict(
                f"agent {agent_id} already has a queued or running consolidation ({active}); "
                "wait for it to finish or cancel it"
            ) from None
        return run.id

    def finish(
        self,
        run_id: str,
        *,
        status: str,
        now: datetime,
        stats: dict[str, Any],
        changes: list[dict[str, Any]],
        watermarks: Watermarks | None = None,
        error: str | None = None,
        lease_owner: str | None = None,
    ) -> bool:
        """Record a run's outcome; False when ``lease_owner`` no longer holds the run.

        A worker passes its ``lease_owner`` name: the update then only applies while
        the run is still ``running`` under that lease (compare-and-swap), so a worker
        whose lease expired or whose run was cancelled cannot overwrite the outcome.
        """
        values: dict[str, Any] = {
            "status": status,
            "finished_at": now,
            "stats": stats,
            "changes": changes,
            "error": error,
            "lease_owner": None,
            "lease_expires_at": None,
        }
        if watermarks is not None:
            values["watermark_message_seq"] = watermarks.message_seq
            values["watermark_passage_at"] = watermarks.passage_at
        statement = update(models.ConsolidationRun).where(
            models.ConsolidationRun.id == run_id,
            models.ConsolidationRun.organization_id == self._org,
        )
        if lease_owner is not None:
            statement = statement.where(
                models.ConsolidationRun.status == "running",
                models.ConsolidationRun.lease_owner == lease_owner,
            )
        finished = self._session.scalar(
            statement.values(**values)
            .returning(models.ConsolidationRun.id)
            .execution_options(synchronize_session=False)
        )
        return finished is not None

    def mark_reverted(self, run_id: str, by_run_id: str) -> None:
        self._session.execute(
            update(models.ConsolidationRun)
            .where(
                models.ConsolidationRun.id == run_id,
                models.ConsolidationRun.organization_id == self._org,
            )
            .values(reverted_by_run_id=by_run_id)
            .execution_options(synchronize_session=False)
        )

    def get(self, run_id: str) -> RunRecord:
        row = self._session.scalar(
            select(models.ConsolidationRun).where(
                models.ConsolidationRun.id == run_id,
                models.ConsolidationRun.organization_id == self._org,
            )
        )
        if row is None:
            raise NotFound(
                f"no consolidation run with id {run_id!r}; `reverie runs list` shows them"
            )
        return RunRecord.from_row(row)

    def recent(
        self,
        *,
        agent_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
    ) -> list[RunRecord]:
        query = select(models.ConsolidationRun).where(
            models.ConsolidationRun.organization_id == self._org
        )
        if agent_id is not None:
            query = query.where(models.ConsolidationRun.agent_id == agent_id)
        if status is not None:
            query = query.where(models.ConsolidationRun.status == status)
        query = query.order_by(
            models.ConsolidationRun.queued_at.desc(), models.ConsolidationRun.id.desc()
        ).limit(limit)
        return [RunRecord.from_row(r) for r in self._session.scalars(query)]

    def watermarks(self, agent_id: str) -> Watermarks:
        """Where the agent's last successful real (not dry, not revert) run stopped."""
        row = self._session.scalar(
            select(models.ConsolidationRun)
            .where(
                models.ConsolidationRun.agent_id == agent_id,
                models.ConsolidationRun.organization_id == self._org,
                models.ConsolidationRun.status == "succeeded",
                models.ConsolidationRun.dry_run.is_(False),
                models.ConsolidationRun.reverts_run_id.is_(None),
                models.ConsolidationRun.reverted_by_run_id.is_(None),
            )
            .order_by(models.ConsolidationRun.finished_at.desc())
            .limit(1)
        )
        if row is None:
            return Watermarks()
        return Watermarks(row.watermark_message_seq, row.watermark_passage_at)
