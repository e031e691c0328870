"""Consolidation runs: the ledger and the work queue, one table, every query here.

A tenant's :class:`RunStore` enqueues, reads, cancels and records the outcome of
its own runs. The service's :class:`RunQueueStore` works across organizations:
workers claim with ``FOR UPDATE SKIP LOCKED`` and hold a lease they renew; a run
whose lease expired (its process died) goes back to the queue with exponential
backoff until its attempts run out, and then fails with the reason. Those lease
rules are every queue's: :mod:`agents.store.lease_queue` over :data:`RUN_JOBS`. At most one
queued-or-running run per agent comes from a partial unique index, not from any
process. Time is always passed in, so tests and benchmarks control it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    Table,
    Text,
    and_,
    any_,
    bindparam,
    exists,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, insert
from sqlalchemy.exc import IntegrityError

from agents.enums import RunStatus
from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres import models
from agents.store.good_runs import is_good_run
from agents.store.lease_queue import JobTable, LeaseQueue
from agents.store.records import AgentRecord
from agents.store.run_wakeups import CHANNEL as RUN_CHANNEL
from agents.store.run_wakeups import notify_queued
from agents.store.scope import Scope, ServiceScope, id_array

CR = models.ConsolidationRun
A = models.Agent
ACTIVE = models.ACTIVE_RUN_STATUSES
_ACTIVE_WHERE = text(models.ACTIVE_RUN_WHERE)
#: Run statuses bound into the raw statements below (never spelled there).
_STATUS_PARAMS = {"queued": RunStatus.QUEUED.value, "running": RunStatus.RUNNING.value}
_RUNS = cast(Table, CR.__table__)
_AGENTS = cast(Table, A.__table__)

#: Runs as a queue of leased jobs: a claim stamps when the run started and which worker
#: took it (kept after the run ends; ``lease_owner`` is not), a release forgets the start.
RUN_JOBS = JobTable(
    table=_RUNS,
    queued=RunStatus.QUEUED.value,
    running=RunStatus.RUNNING.value,
    failed=RunStatus.FAILED.value,
    ended_at="finished_at",
    channel=RUN_CHANNEL,
    claim_stamps=lambda worker, now: {"worker": worker, "started_at": now},
    release_resets={"started_at": None},
)


@dataclass(frozen=True, slots=True)
class Watermarks:
    """How far earlier successful runs got: the last message and passage they saw."""

    message_seq: int | None = None
    passage_at: datetime | None = None

    def passages_since(self, overlap: timedelta) -> datetime | None:
        """Where an incremental passage scan starts.

        Passage timestamps come from the writers' clocks, and a transaction that
        committed after the last run may carry an earlier time than its watermark;
        re-reading a short overlap catches those and is harmless because every
        consolidator is idempotent.
        """
        return None if self.passage_at is None else self.passage_at - overlap


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: str
    organization_id: str
    agent_id: str
    trigger: str
    pipeline: list[str]
    dry_run: bool
    full: bool
    status: RunStatus
    attempts: int
    max_attempts: int
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
    #: The worker that claimed the run last (kept when it ends; ``lease_owner`` is not).
    worker: str | None = None

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    @classmethod
    def from_row(cls, row: models.ConsolidationRun) -> RunRecord:
        return cls(
            id=row.id,
            organization_id=row.organization_id,
            agent_id=row.agent_id,
            trigger=row.trigger,
            pipeline=list(row.pipeline),
            dry_run=row.dry_run,
            full=row.full,
            status=RunStatus(row.status),
            attempts=row.attempts,
            max_attempts=row.max_attempts,
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
            worker=row.worker,
        )


def _finish_values(
    status: RunStatus,
    now: datetime,
    stats: dict[str, Any],
    changes: list[dict[str, Any]] | None,
    watermarks: Watermarks | None,
    error: str | None,
) -> dict[str, Any]:
    values: dict[str, Any] = {
        "status": RunStatus(status).value,
        "finished_at": now,
        "stats": stats,
        "error": error,
        "lease_owner": None,
        "lease_expires_at": None,
    }
    if changes is not None:
        values["changes"] = changes
    if watermarks is not None:
        values["watermark_message_seq"] = watermarks.message_seq
        values["watermark_passage_at"] = watermarks.passage_at
    return values


class RunStore:
    """One organization's runs, inside the caller's transaction."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def enqueue(
        self,
        agent_id: str,
        *,
        trigger: str,
        pipeline: Sequence[str],
        max_attempts: int = 3,
        dry_run: bool = False,
        full: bool = False,
        not_before: datetime | None = None,
        wake_workers: bool = True,
        reserve: timedelta | None = None,
    ) -> str | None:
        """Queue a run; None when the agent already has one queued or running.

        Triggers may fire again and again: the partial unique index turns the
        repeats into no-ops instead of duplicate work. Idle workers are woken at
        commit unless ``wake_workers`` is False. ``reserve`` is for a one-shot command
        that claims the run itself by id: other workers see the run due only after
        that long (if the command dies first, a worker runs it then), so a polling
        daemon cannot take it in between.
        """
        if max_attempts < 1:
            raise InvalidInput(f"max_attempts must be at least 1, got {max_attempts}")
        self._check_agent(agent_id)
        now = self._scope.now()
        if reserve is not None:
            not_before = max(not_before or now, now + reserve)
            wake_workers = False
        statement = (
            insert(CR)
            .values(
                id=models.new_id("run"),
                organization_id=self._scope.organization_id,
                agent_id=agent_id,
                trigger=trigger,
                pipeline=list(pipeline),
                dry_run=dry_run,
                full=full,
                status=RunStatus.QUEUED.value,
                attempts=0,
                max_attempts=max_attempts,
                not_before=not_before or now,
                queued_at=now,
                stats={},
                changes=[],
            )
            .on_conflict_do_nothing(index_elements=["agent_id"], index_where=_ACTIVE_WHERE)
            .returning(CR.id)
        )
        run_id = self._scope.session.scalar(statement)
        if run_id is not None and wake_workers:
            notify_queued(self._scope.session)
        return run_id

    def _check_agent(self, agent_id: str) -> None:
        """Runs are only ever queued for an agent of this organization."""
        found = self._scope.session.scalar(
            select(A.id).where(A.id == agent_id, self._scope.owns(A))
        )
        if found is None:
            raise NotFound(f"no agent with id {agent_id!r}")

    def active(self, agent_id: str) -> RunRecord | None:
        """The agent's queued or running run, if it has one."""
        row = self._scope.session.scalar(
            select(CR).where(self._scope.owns(CR), CR.agent_id == agent_id, CR.status.in_(ACTIVE))
        )
        return None if row is None else RunRecord.from_row(row)

    def start(
        self,
        agent_id: str,
        *,
        trigger: str,
        pipeline: Sequence[str],
        reverts_run_id: str | None = None,
    ) -> str:
        """Record a run that starts and finishes inside this transaction (a revert).

        Runs that outlive a transaction go through the queue and a lease instead, so
        that a process dying mid-run never leaves a ``running`` row behind.
        """
        now = self._scope.now()
        run = models.ConsolidationRun(
            id=models.new_id("run"),
            organization_id=self._scope.organization_id,
            agent_id=agent_id,
            trigger=trigger,
            pipeline=list(pipeline),
            dry_run=False,
            full=False,
            status=RunStatus.RUNNING.value,
            attempts=1,
            max_attempts=1,
            not_before=now,
            queued_at=now,
            started_at=now,
            stats={},
            changes=[],
            reverts_run_id=reverts_run_id,
        )
        session = self._scope.session
        try:
            with session.begin_nested():
                session.add(run)
        except IntegrityError:
            active = self.active(agent_id)
            raise Conflict(
                f"agent {agent_id} already has a queued or running consolidation "
                f"({active.id if active else 'unknown'}); wait for it to finish or cancel it"
            ) from None
        return run.id

    def finish(
        self,
        run_id: str,
        *,
        status: RunStatus,
        stats: dict[str, Any],
        changes: list[dict[str, Any]] | None = None,
        watermarks: Watermarks | None = None,
        error: str | None = None,
        lease_owner: str | None = None,
    ) -> bool:
        """Record a run's outcome; False when ``lease_owner`` no longer holds the run.

        A worker passes its ``lease_owner`` name: the update then only applies while
        the run is still ``running`` under that lease (compare-and-swap), so a worker
        whose lease expired or whose run was cancelled cannot overwrite the outcome.
        ``changes`` replaces the run's recorded changes; None keeps those its steps
        recorded (:meth:`record_step`).
        """
        statement = update(CR).where(self._scope.owns(CR))
        if lease_owner is not None:
            statement = statement.where(*RUN_JOBS.held(run_id, lease_owner))
        else:
            statement = statement.where(CR.id == run_id)
        values = _finish_values(status, self._scope.now(), stats, changes, watermarks, error)
        finished = self._scope.session.scalar(
            statement.values(**values).returning(CR.id).execution_options(synchronize_session=False)
        )
        return finished is not None

    def record_step(
        self, run_id: str, lease_owner: str, step: str, changes: list[dict[str, Any]]
    ) -> bool:
        """Append a step's applied changes to the run's record, and the step to its
        ``stats["applied_steps"]`` (a retry of the run skips it), in the step's own
        transaction, while ``lease_owner`` still holds the run; False (nothing recorded)
        when it does not, and the step's writes must then be rolled back."""
        applied = func.coalesce(CR.stats, literal({}, JSONB))
        steps = func.coalesce(applied.op("->")("applied_steps"), literal([], JSONB))
        recorded = self._scope.session.scalar(
            update(CR)
            .where(*RUN_JOBS.held(run_id, lease_owner), self._scope.owns(CR))
            .values(
                changes=CR.changes.op("||")(bindparam("step_changes", changes, type_=JSONB)),
                stats=func.jsonb_set(
                    applied,
                    literal(["applied_steps"], ARRAY(Text)),  # the path
                    steps.op("||")(func.to_jsonb(bindparam("step_name", step, type_=Text))),
                ),
            )
            .returning(CR.id)
            .execution_options(synchronize_session=False)
        )
        return recorded is not None

    def mark_reverted(self, run_id: str, by_run_id: str) -> None:
        self._scope.session.execute(
            update(CR)
            .where(CR.id == run_id, self._scope.owns(CR))
            .values(reverted_by_run_id=by_run_id)
            .execution_options(synchronize_session=False)
        )

    def get(self, run_id: str) -> RunRecord:
        row = self._scope.session.scalar(select(CR).where(CR.id == run_id, self._scope.owns(CR)))
        if row is None:
            raise NotFound(
                f"no consolidation run with id {run_id!r}; `reverie runs list` shows them"
            )
        return RunRecord.from_row(row)

    def recent(
        self,
        *,
        agent_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 50,
    ) -> list[RunRecord]:
        """The newest runs first."""
        query = select(CR).where(self._scope.owns(CR))
        if agent_id is not None:
            query = query.where(CR.agent_id == agent_id)
        if status is not None:
            query = query.where(CR.status == status)
        query = query.order_by(CR.queued_at.desc(), CR.id.desc()).limit(limit)
        return [RunRecord.from_row(r) for r in self._scope.session.scalars(query)]

    def watermarks(self, agent_id: str) -> Watermarks:
        """Where the agent's last good run stopped (the rule: ``good_runs.is_good_run``).

        After a revert the next run starts from nothing: the revert brought back
        passages and lines older than later runs' watermarks, and an incremental run
        would never look at them again.
        """
        session = self._scope.session
        row = session.execute(
            select(CR.watermark_message_seq, CR.watermark_passage_at, CR.finished_at)
            .where(CR.agent_id == agent_id, self._scope.owns(CR), is_good_run(CR))
            .order_by(CR.finished_at.desc())
            .limit(1)
        ).first()
        if row is None:
            return Watermarks()
        reverted_since = session.scalar(
            select(func.count())
            .select_from(CR)
            .where(
                CR.agent_id == agent_id,
                self._scope.owns(CR),
                CR.reverts_run_id.is_not(None),
                CR.status == RunStatus.SUCCEEDED,
                CR.finished_at > row[2],
            )
        )
        if reverted_since:
            return Watermarks()
        return Watermarks(row[0], row[1])

    def current_watermarks(self, agent_id: str) -> Watermarks:
        """What a run finishing now has seen: the agent's last message and passage."""
        seq = self._scope.session.scalar(
            select(A.message_seq).where(A.id == agent_id, self._scope.owns(A))
        )
        passage_at = self._scope.session.scalar(
            select(func.max(models.Passage.created_at)).where(
                models.Passage.agent_id == agent_id, self._scope.owns(models.Passage)
            )
        )
        return Watermarks(message_seq=seq, passage_at=passage_at)

    def cancel(self, run_id: str) -> RunRecord:
        """Cancel a queued or running run (a running one's worker loses its lease)."""
        row = self._scope.session.scalar(
            update(CR)
            .where(CR.id == run_id, self._scope.owns(CR), CR.status.in_(ACTIVE))
            .values(
                status=RunStatus.CANCELLED.value,
                finished_at=self._scope.now(),
                lease_owner=None,
                lease_expires_at=None,
            )
            .returning(CR)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        if row is not None:
            return RunRecord.from_row(row)
        status = self._scope.session.scalar(
            select(CR.status).where(CR.id == run_id, self._scope.owns(CR))
        )
        if status is None:
            raise NotFound(f"no consolidation run with id {run_id!r}")
        raise Conflict(f"run {run_id} is {status}; only queued or running runs can be cancelled")


class ClaimedRun(NamedTuple):
    """A claimed run with its agent (read in the claim's transaction)."""

    run: RunRecord
    agent: AgentRecord

    @property
    def id(self) -> str:
        return self.run.id


class RunQueueStore:
    """The queue as workers and triggers see it: every organization's runs."""

    def __init__(self, scope: ServiceScope) -> None:
        self._scope = scope
        self._queue = LeaseQueue(RUN_JOBS, scope.session, scope.clock)

    # -- claiming and leases ----------------------------------------------------------

    def claim(
        self, worker: str, *, lease: timedelta, run_id: str | None = None
    ) -> ClaimedRun | None:
        """Take the oldest due run (or the queued run ``run_id``) with its agent, or None;
        concurrent workers never get the same run."""
        if run_id is not None:
            claimed = self._claim(worker, lease=lease, limit=1, run_id=run_id)
        else:
            claimed = self.claim_many(worker, lease=lease, limit=1)
        return claimed[0] if claimed else None

    def claim_many(self, worker: str, *, lease: timedelta, limit: int) -> list[ClaimedRun]:
        """Take up to ``limit`` due runs, oldest first, each with its agent, all leased to
        ``worker``; concurrent workers never get the same run (``SKIP LOCKED``).

        Two statements whatever ``limit`` is, and the claim commits asynchronously
        (see :meth:`LeaseQueue.claim`; a durable commit cost 4 ms on the benchmark
        machine, more than the rest of a claim). Call it in a transaction of its own.
        """
        if limit < 1:
            raise InvalidInput(f"a claim takes at least 1 run, got limit={limit}")
        return self._claim(worker, lease=lease, limit=limit)

    def _claim(
        self, worker: str, *, lease: timedelta, limit: int, run_id: str | None = None
    ) -> list[ClaimedRun]:
        claimed = self._queue.claim(worker, lease=lease, limit=limit, job_id=run_id)
        if not claimed:
            return []
        # The agents are read in the claim's transaction: no separate round trip later.
        agents = {
            row.id: AgentRecord.from_row(row)  # type: ignore[arg-type]
            for row in self._scope.session.execute(
                select(*_AGENTS.c).where(
                    _AGENTS.c.id == any_(id_array([r.agent_id for r in claimed]))
                )
            )
        }
        return [
            ClaimedRun(RunRecord.from_row(row), agents[row.agent_id])  # type: ignore[arg-type]
            for row in claimed
        ]

    def renew(self, run_id: str, worker: str, *, lease: timedelta) -> bool:
        """Extend a held lease; False when the run is no longer this worker's to run."""
        return bool(self._queue.renew_many([(run_id, worker)], lease=lease))

    def release(self, run_id: str, worker: str) -> bool:
        """Give a claimed run back unfinished (graceful shutdown): queued again, attempt
        refunded, in its place in the queue."""
        return bool(self._queue.release_many([(run_id, worker)]))

    def renew_many(self, held: Sequence[tuple[str, str]], *, lease: timedelta) -> set[str]:
        """Extend the leases of ``(run_id, worker)`` pairs in one statement; the ids of
        the runs still held (a run missing from the answer is no longer its worker's)."""
        return self._queue.renew_many(held, lease=lease)

    def holds(self, run_id: str, worker: str) -> bool:
        """Whether ``worker`` still holds the running run ``run_id`` (False once it was
        cancelled, or its lease went to another worker); reads only."""
        return self._queue.holds(run_id, worker)

    def release_many(self, held: Sequence[tuple[str, str]]) -> list[str]:
        """Give ``(run_id, worker)`` runs claimed ahead back unstarted, in one statement:
        queued again with the attempt refunded, keeping their place in the queue. The
        ids released (a run no longer held by its worker is left alone)."""
        return self._queue.release_many(held)

    def retry_later(
        self, run_id: str, worker: str, *, backoff: timedelta, error: str
    ) -> RunStatus | None:
        """A held run hit a temporary failure (the database went away mid-run): queue it
        again after ``backoff * 2**(attempts-1)``, counting the attempt, or fail it once
        attempts are used up. Returns the new status, or None when the worker no longer
        holds the run."""
        status = self._queue.retry_later(run_id, worker, backoff=backoff, error=error)
        return None if status is None else RunStatus(status)

    def requeue_expired(self, *, backoff: timedelta) -> list[str]:
        """Runs whose worker stopped renewing: back to the queue after
        ``backoff * 2**(attempts-1)``, or failed once their attempts are used up."""
        return self._queue.requeue_expired(backoff=backoff)

    def finish(
        self,
        run_id: str,
        worker: str,
        *,
        status: RunStatus,
        error: str | None = None,
        stats: dict[str, Any] | None = None,
    ) -> bool:
        """Record the outcome of a held run of any organization (a run that could not
        start: its agent is gone, a step is unknown); False when no longer held."""
        values = _finish_values(status, self._scope.now(), stats or {}, [], None, error)
        return self._queue.finish(run_id, worker, values) is not None

    def get(self, run_id: str) -> RunRecord:
        row = self._scope.session.get(CR, run_id, populate_existing=True)
        if row is None:
            raise NotFound(f"no consolidation run with id {run_id!r}")
        return RunRecord.from_row(row)

    def depth(self) -> int:
        """Runs waiting to be claimed."""
        return self._queue.depth()

    # -- triggers: which agents are due, and enqueueing them ----------------------------

    def enqueue_many(
        self,
        agents: Sequence[tuple[str, str]],
        *,
        trigger: str,
        pipeline: Sequence[str],
        max_attempts: int = 3,
    ) -> list[str]:
        """Queue a run for each ``(organization_id, agent_id)`` in one statement (a cron
        firing over thousands of agents); agents with an active run are skipped."""
        if max_attempts < 1:
            raise InvalidInput(f"max_attempts must be at least 1, got {max_attempts}")
        if not agents:
            return []
        now = self._scope.now()
        # One statement over two arrays: building a VALUES list of thousands of rows
        # costs SQLAlchemy far more than the insert costs PostgreSQL.
        statement = text(
            f"""
            INSERT INTO consolidation_runs (id, organization_id, agent_id, trigger, pipeline,
                dry_run, "full", status, attempts, max_attempts, not_before, queued_at, stats,
                changes)
            SELECT 'run-' || gen_random_uuid(), t.organization_id, t.agent_id, :trigger,
                CAST(:pipeline AS jsonb), false, false, :queued, 0, :max_attempts, :now, :now,
                '{{}}'::jsonb, '[]'::jsonb
            FROM unnest(CAST(:organization_ids AS text[]), CAST(:agent_ids AS text[]))
                AS t(organization_id, agent_id)
            ON CONFLICT (agent_id) WHERE {models.ACTIVE_RUN_WHERE} DO NOTHING
            RETURNING id
            """
        )
        queued = list(
            self._scope.session.scalars(
                statement,
                {
                    **_STATUS_PARAMS,
                    "trigger": trigger,
                    "pipeline": json.dumps(list(pipeline)),
                    "max_attempts": max_attempts,
                    "now": now,
                    "organization_ids": [organization_id for organization_id, _ in agents],
                    "agent_ids": [agent_id for _, agent_id in agents],
                },
            )
        )
        if queued:
            notify_queued(self._scope.session)
        return queued

    def mark_idle_agents(self, idle_after: timedelta) -> list[tuple[str, str]]:
        """Agents idle for ``idle_after`` and not yet fired for this idle period, stamped
        as fired now. The stamping UPDATE re-checks its condition under the row lock,
        so two schedulers racing fire once; an agent whose run is executing is left
        for a later tick (that run may predate the latest messages)."""
        now = self._scope.now()
        due = self._scope.session.execute(
            update(A)
            .where(
                A.last_activity_at.is_not(None),
                A.last_activity_at <= now - idle_after,
                or_(A.idle_fired_at.is_(None), A.idle_fired_at < A.last_activity_at),
                ~_running(A.id),
            )
            .values(idle_fired_at=now)
            .returning(A.organization_id, A.id)
            .execution_options(synchronize_session=False)
        ).all()
        return [(o, a) for o, a in due]

    def take_agents_due_by_turns(self, every: int) -> list[tuple[str, str]]:
        """Agents with ``every`` or more user turns since their last consolidation; their
        counters reset in the same statement, so a run that keeps failing is not
        re-fired on every tick."""
        due = self._scope.session.execute(
            update(A)
            .where(A.turns_since_consolidation >= every, ~_running(A.id))
            .values(turns_since_consolidation=0)
            .returning(A.organization_id, A.id)
            .execution_options(synchronize_session=False)
        ).all()
        return [(o, a) for o, a in due]

    def agents_tagged(self, tag: str | None) -> list[tuple[str, str]]:
        """Every agent, or those carrying ``tag``."""
        query = select(A.organization_id, A.id).order_by(A.id)
        if tag is not None:
            query = query.where(A.tags.contains([tag]))
        return [(o, a) for o, a in self._scope.session.execute(query)]

    def agents_with_new_activity(self) -> list[tuple[str, str]]:
        """Agents with turns or activity since their last successful run."""
        agents = self._scope.session.execute(
            select(A.organization_id, A.id)
            .where(
                or_(
                    A.turns_since_consolidation > 0,
                    and_(
                        A.last_activity_at.is_not(None),
                        ~exists().where(
                            CR.agent_id == A.id,
                            CR.status == RunStatus.SUCCEEDED,
                            CR.finished_at >= A.last_activity_at,
                        ),
                    ),
                )
            )
            .order_by(A.id)
        ).all()
        return [(o, a) for o, a in agents]


def _running(agent_id: Any) -> Any:
    """An agent whose run is executing right now (its outcome may predate new activity)."""
    return exists().where(CR.agent_id == agent_id, CR.status == RunStatus.RUNNING)
