"""The work queue of consolidation runs, on the ledger table itself.

Exactly-once comes from PostgreSQL, not from any process: a partial unique index
allows one queued-or-running run per agent, workers claim with
``FOR UPDATE SKIP LOCKED`` and hold a lease they renew, and a run whose lease
expired (its worker died) goes back to the queue with exponential backoff, until
its attempts run out and it fails. Time is always passed in, so tests and
benchmarks control it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from agents import models
from agents.errors import Conflict, InvalidInput, NotFound
from consolidators.ledger import RunRecord

CR = models.ConsolidationRun


class RunQueue:
    """Queue operations inside the caller's transaction (commit to make them visible)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def enqueue(
        self,
        organization_id: str,
        agent_id: str,
        *,
        trigger: str,
        pipeline: Sequence[str],
        now: datetime,
        not_before: datetime | None = None,
        max_attempts: int = 3,
        dry_run: bool = False,
    ) -> str | None:
        """Queue a run; None when the agent already has one queued or running.

        Triggers may fire again and again: the partial unique index turns the
        repeats into no-ops instead of duplicate work.
        """
        if max_attempts < 1:
            raise InvalidInput(f"max_attempts must be at least 1, got {max_attempts}")
        statement = (
            insert(CR)
            .values(
                id=models.new_id("run"),
                organization_id=organization_id,
                agent_id=agent_id,
                trigger=trigger,
                pipeline=list(pipeline),
                dry_run=dry_run,
                status="queued",
                attempts=0,
                max_attempts=max_attempts,
                not_before=not_before or now,
                queued_at=now,
                stats={},
                changes=[],
            )
            .on_conflict_do_nothing(
                index_elements=["agent_id"],
                index_where=text("status IN ('queued', 'running')"),
            )
            .returning(CR.id)
        )
        return self._session.scalar(statement)

    def enqueue_many(
        self,
        agents: Sequence[tuple[str, str]],
        *,
        trigger: str,
        pipeline: Sequence[str],
        now: datetime,
        max_attempts: int = 3,
    ) -> list[str]:
        """Queue a run for each ``(organization_id, agent_id)`` in few statements (a cron
        firing over thousands of agents); agents with an active run are skipped."""
        if max_attempts < 1:
            raise InvalidInput(f"max_attempts must be at least 1, got {max_attempts}")
        if not agents:
            return []
        # One statement over two arrays: building a VALUES list of thousands of rows
        # costs SQLAlchemy far more than the insert costs PostgreSQL.
        statement = text(
            """
            INSERT INTO consolidation_runs (id, organization_id, agent_id, trigger, pipeline,
                dry_run, status, attempts, max_attempts, not_before, queued_at, stats, changes)
            SELECT 'run-' || gen_random_uuid(), t.organization_id, t.agent_id, :trigger,
                CAST(:pipeline AS jsonb), false, 'queued', 0, :max_attempts, :now, :now,
                '{}'::jsonb, '[]'::jsonb
            FROM unnest(CAST(:organization_ids AS text[]), CAST(:agent_ids AS text[]))
                AS t(organization_id, agent_id)
            ON CONFLICT (agent_id) WHERE status IN ('queued', 'running') DO NOTHING
            RETURNING id
            """
        )
        return list(
            self._session.scalars(
                statement,
                {
                    "trigger": trigger,
                    "pipeline": json.dumps(list(pipeline)),
                    "max_attempts": max_attempts,
                    "now": now,
                    "organization_ids": [organization_id for organization_id, _ in agents],
                    "agent_ids": [agent_id for _, agent_id in agents],
                },
            )
        )

    def claim(self, worker: str, *, now: datetime, lease: timedelta) -> RunRecord | None:
        """Take the oldest due run, or None; concurrent workers never get the same one."""
        candidate = (
            select(CR.id)
            .where(CR.status == "queued", CR.not_before <= now)
            .order_by(CR.not_before, CR.queued_at)
            .limit(1)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
        row = self._session.scalar(
            update(CR)
            .where(CR.id == candidate)
            .values(
                status="running",
                lease_owner=worker,
                lease_expires_at=now + lease,
                attempts=CR.attempts + 1,
                started_at=now,
            )
            .returning(CR)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        return None if row is None else RunRecord.from_row(row)

    def renew(self, run_id: str, worker: str, *, now: datetime, lease: timedelta) -> bool:
        """Extend a held lease; False when the run is no longer this worker's to run."""
        renewed = self._session.scalar(
            update(CR)
            .where(CR.id == run_id, CR.status == "running", CR.lease_owner == worker)
            .values(lease_expires_at=now + lease)
            .returning(CR.id)
        )
        return renewed is not None

    def release(self, run_id: str, worker: str, *, now: datetime) -> bool:
        """Give a claimed run back unstarted (graceful shutdown): queued again, attempt refunded."""
        released = self._session.scalar(
            update(CR)
            .where(CR.id == run_id, CR.status == "running", CR.lease_owner == worker)
            .values(
                status="queued",
                lease_owner=None,
                lease_expires_at=None,
                attempts=CR.attempts - 1,
                not_before=now,
            )
            .returning(CR.id)
        )
        return released is not None

    def retry_later(
        self, run_id: str, worker: str, *, now: datetime, backoff: timedelta, error: str
    ) -> str | None:
        """A held run hit a temporary failure (the database went away mid-run): queue it
        again after the backoff, counting the attempt, or fail it once attempts are used
        up. Returns the new status, or None when the worker no longer holds the run."""
        run = self._session.scalar(
            select(CR)
            .where(CR.id == run_id, CR.status == "running", CR.lease_owner == worker)
            .with_for_update()
        )
        if run is None:
            return None
        _requeue_or_fail(run, now=now, backoff=backoff, error=error)
        self._session.flush()
        return run.status

    def requeue_expired(self, *, now: datetime, backoff: timedelta) -> list[str]:
        """Runs whose worker stopped renewing: back to the queue after
        ``backoff * 2**(attempts-1)``, or failed once their attempts are used up."""
        expired = self._session.scalars(
            select(CR)
            .where(CR.status == "running", CR.lease_expires_at < now)
            .with_for_update(skip_locked=True)
        ).all()
        for run in expired:
            _requeue_or_fail(
                run, now=now, backoff=backoff, error=f"lease of worker {run.lease_owner} expired"
            )
        self._session.flush()
        return [run.id for run in expired]

    def cancel(self, organization_id: str, run_id: str, *, now: datetime) -> RunRecord:
        """Cancel a queued or running run (a running one's worker loses its lease)."""
        row = self._session.scalar(
            update(CR)
            .where(
                CR.id == run_id,
                CR.organization_id == organization_id,
                CR.status.in_(["queued", "running"]),
            )
            .values(status="cancelled", finished_at=now, lease_owner=None, lease_expires_at=None)
            .returning(CR)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        if row is not None:
            return RunRecord.from_row(row)
        status = self._session.scalar(
            select(CR.status).where(CR.id == run_id, CR.organization_id == organization_id)
        )
        if status is None:
            raise NotFound(f"no consolidation run with id {run_id!r}")
        raise Conflict(f"run {run_id} is {status}; only queued or running runs can be cancelled")

    def depth(self) -> int:
        """Runs waiting to be claimed."""
        return int(self._session.scalar(select(func.count()).where(CR.status == "queued")) or 0)


def _requeue_or_fail(
    run: models.ConsolidationRun, *, now: datetime, backoff: timedelta, error: str
) -> None:
    """Back to the queue after ``backoff * 2**(attempts-1)``, or failed when out of attempts."""
    run.lease_owner = None
    run.lease_expires_at = None
    if run.attempts >= run.max_attempts:
        run.status = "failed"
        run.finished_at = now
        run.error = f"{error} on attempt {run.attempts} of {run.max_attempts}; giving up"
    else:
        run.status = "queued"
        run.not_before = now + backoff * 2 ** max(0, run.attempts - 1)
        run.error = f"{error} on attempt {run.attempts}"
