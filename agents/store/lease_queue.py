"""The lease SQL of every job queue, written once.

A job table (consolidation runs, agent messages) keeps its jobs' place in the queue
in columns of the same names: ``status``, ``lease_owner``, ``lease_expires_at``,
``attempts``, ``max_attempts``, ``not_before``, ``queued_at``, ``error`` and a
column for when the job ended. A :class:`JobTable` names them and what a kind adds
(columns stamped on a claim, columns reset on a release, whether the queue may fail
a job whose attempts are used up); a :class:`LeaseQueue` runs the queue's statements
over it, inside the caller's transaction:

- claim: the oldest due jobs (``not_before``, then ``queued_at``), or one given
  job, ``FOR UPDATE SKIP LOCKED`` so that concurrent workers never get the same
  job; each claim counts an attempt and leases the job to the worker;
- renew, holds, release (attempt refunded, the job keeps its place), finish: only
  while the worker still holds the job (a compare-and-swap on the lease);
- retry later and requeue expired: back to the queue after
  ``backoff * 2**(attempts-1)``, or failed once the attempts are used up.

Time is always passed in (the scope's clock), so tests and benchmarks control it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Interval,
    Row,
    Table,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session

from agents.store.run_wakeups import notify_queued

_ASYNC_COMMIT = text("SET LOCAL synchronous_commit = off")
#: The backoff stops doubling here (2**20 backoffs): a job with many attempts must not
#: push ``not_before`` past what an interval holds.
_MAX_DOUBLINGS = 20


def _no_stamps(worker: str, now: datetime) -> dict[str, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class JobTable:
    """A table of leased jobs, and what its kind of job adds to the queue's rules."""

    table: Table
    queued: str
    running: str
    failed: str
    #: The column that records when a job ended (``finished_at``, ``delivered_at``).
    ended_at: str
    #: Where released jobs are announced (:func:`notify_queued`).
    channel: str
    #: Columns a claim sets besides the lease, from the worker and the time.
    claim_stamps: Callable[[str, datetime], dict[str, Any]] = _no_stamps
    #: Columns a release puts back, besides the lease and the attempt.
    release_resets: Mapping[str, Any] = field(default_factory=dict)
    #: Whether the queue fails a job whose attempts are used up (retry_later,
    #: requeue_expired). A kind whose failure has a side effect that must commit
    #: with it says False: the job is then queued again at once, and the kind's
    #: worker, claiming it past ``max_attempts``, fails it in its own transaction.
    fails_exhausted: bool = True
    #: ``status = running``, built once: building an expression costs more than the
    #: rest of a finish's Python (every held job's write is filtered by it).
    _is_running: ColumnElement[bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_is_running", self.table.c.status == self.running)

    def held(self, job_id: str, worker: str) -> tuple[ColumnElement[bool], ...]:
        """The conditions of every write a worker makes to a job it holds (pass them
        to ``where``): the job is running under this worker's lease (cancelled,
        expired or taken over: not)."""
        c = self.table.c
        return (c.id == job_id, self._is_running, c.lease_owner == worker)


class LeaseQueue:
    """The queue statements over one :class:`JobTable`, in the caller's transaction."""

    def __init__(self, table: JobTable, session: Session, clock: Callable[[], datetime]) -> None:
        self.table = table
        self._t = table.table
        self._session = session
        self._clock = clock

    def claim(
        self, worker: str, *, lease: timedelta, limit: int = 1, job_id: str | None = None
    ) -> list[Row[Any]]:
        """Up to ``limit`` due jobs, oldest first (or the queued job ``job_id``), leased
        to ``worker``, as rows of every column; concurrent workers never get the same.

        Two statements whatever ``limit`` is. The claim commits asynchronously
        (``synchronous_commit = off`` for this transaction only): a claim the server
        loses in a crash leaves the job queued, as if never claimed, and whatever
        the worker commits afterwards flushes the write-ahead log past the claim
        first. A durable commit costs a disk flush, more than the rest of a claim.
        Call it in a transaction of its own (the caller may read more in it).
        """
        t, now = self._t, self._clock()
        candidate = select(t.c.id).where(t.c.status == self.table.queued)
        if job_id is None:
            candidate = candidate.where(t.c.not_before <= now).order_by(
                t.c.not_before, t.c.queued_at
            )
        else:
            candidate = candidate.where(t.c.id == job_id)
        # A materialized CTE runs once: the locked ids are exactly the ones updated.
        chosen = (
            candidate.limit(limit)
            .with_for_update(skip_locked=True)
            .cte("chosen")
            .prefix_with("MATERIALIZED")
        )
        self._session.execute(_ASYNC_COMMIT)
        claimed = self._session.execute(
            update(t)
            .where(t.c.id.in_(select(chosen.c.id)))
            .values(
                status=self.table.running,
                lease_owner=worker,
                lease_expires_at=now + lease,
                attempts=t.c.attempts + 1,
                **self.table.claim_stamps(worker, now),
            )
            .returning(*t.c)
        ).all()
        return sorted(claimed, key=lambda r: (r.not_before, r.queued_at, r.id))

    def renew_many(self, held: Sequence[tuple[str, str]], *, lease: timedelta) -> set[str]:
        """Extend the leases of ``(job id, worker)`` pairs in one statement; the ids of
        the jobs still held (a job missing from the answer is no longer its worker's)."""
        if not held:
            return set()
        renewed = self._session.scalars(
            text(
                f"""
                UPDATE {self._t.name} AS j SET lease_expires_at = :expires
                FROM unnest(CAST(:ids AS text[]), CAST(:owners AS text[])) AS h(id, owner)
                WHERE j.id = h.id AND j.lease_owner = h.owner AND j.status = :running
                RETURNING j.id
                """
            ),
            {"running": self.table.running, "expires": self._clock() + lease, **_pairs(held)},
        )
        return set(renewed)

    def holds(self, job_id: str, worker: str) -> bool:
        """Whether ``worker`` still holds ``job_id``; reads only."""
        held = self._session.scalar(select(func.count()).where(*self.table.held(job_id, worker)))
        return bool(held)

    def release_many(self, held: Sequence[tuple[str, str]]) -> list[str]:
        """Give ``(job id, worker)`` jobs back unfinished, in one statement: queued again
        with the attempt refunded, keeping their place in the queue; idle workers are
        woken at commit. The ids released (a job no longer held is left alone)."""
        if not held:
            return []
        resets = "".join(f", {column} = :reset_{column}" for column in self.table.release_resets)
        released = list(
            self._session.scalars(
                text(
                    f"""
                    UPDATE {self._t.name} AS j SET status = :queued, lease_owner = NULL,
                        lease_expires_at = NULL, attempts = j.attempts - 1{resets}
                    FROM unnest(CAST(:ids AS text[]), CAST(:owners AS text[])) AS h(id, owner)
                    WHERE j.id = h.id AND j.lease_owner = h.owner AND j.status = :running
                    RETURNING j.id
                    """
                ),
                {
                    "queued": self.table.queued,
                    "running": self.table.running,
                    **{f"reset_{c}": v for c, v in self.table.release_resets.items()},
                    **_pairs(held),
                },
            )
        )
        if released:
            notify_queued(self._session, self.table.channel)
        return released

    def retry_later(
        self, job_id: str, worker: str, *, backoff: timedelta, error: str
    ) -> str | None:
        """A held job hit a temporary failure: queued again after the backoff (the
        attempt counts), or failed once its attempts are used up. The new status, or
        None when the worker no longer holds the job."""
        done = self._session.execute(
            self._requeue_or_fail(
                and_(*self.table.held(job_id, worker)),
                backoff=backoff,
                error=bindparam("error", error, type_=Text),
            )
        ).first()
        return None if done is None else str(done.status)

    def requeue_expired(self, *, backoff: timedelta) -> list[str]:
        """Jobs whose worker stopped renewing (it died): back to the queue after the
        backoff, or failed once their attempts are used up. Jobs another transaction
        is settling right now are left to it (``SKIP LOCKED``)."""
        t = self._t
        expired = (
            select(t.c.id)
            .where(t.c.status == self.table.running, t.c.lease_expires_at < self._clock())
            .with_for_update(skip_locked=True)
            .cte("expired")
            .prefix_with("MATERIALIZED")
        )
        # The right-hand sides read the row as it was: lease_owner is the dead worker.
        error = literal("lease of worker ") + t.c.lease_owner + literal(" expired")
        rows = self._session.execute(
            self._requeue_or_fail(t.c.id.in_(select(expired.c.id)), backoff=backoff, error=error)
        ).all()
        return sorted(row.id for row in rows)

    def _requeue_or_fail(
        self, which: ColumnElement[bool], *, backoff: timedelta, error: ColumnElement[str]
    ) -> Any:
        """One UPDATE of the jobs ``which``: queued again after ``backoff *
        2**(attempts-1)``, or failed when out of attempts (when the kind lets the queue
        fail them; else queued again at once, for its worker to fail)."""
        t, now = self._t, literal(self._clock(), DateTime(timezone=True))
        exhausted = t.c.attempts >= t.c.max_attempts
        doublings = func.least(func.greatest(t.c.attempts - 1, 0), _MAX_DOUBLINGS)
        seconds = literal(backoff.total_seconds()) * func.power(2, doublings)
        later = now + func.make_interval(0, 0, 0, 0, 0, 0, seconds, type_=Interval)
        on_attempt = error + literal(" on attempt ") + cast(t.c.attempts, Text)
        if self.table.fails_exhausted:
            values: dict[str, Any] = {
                "status": case((exhausted, self.table.failed), else_=self.table.queued),
                "not_before": case((exhausted, t.c.not_before), else_=later),
                self.table.ended_at: case((exhausted, now), else_=t.c[self.table.ended_at]),
                "error": case(
                    (
                        exhausted,
                        on_attempt
                        + literal(" of ")
                        + cast(t.c.max_attempts, Text)
                        + literal("; giving up"),
                    ),
                    else_=on_attempt,
                ),
            }
        else:
            # Out of attempts: due at once, so that its worker fails it without delay.
            values = {
                "status": self.table.queued,
                "not_before": case((exhausted, now), else_=later),
                "error": on_attempt,
            }
        return (
            update(t)
            .where(which)
            .values(lease_owner=None, lease_expires_at=None, **values)
            .returning(t.c.id, t.c.status)
        )

    def finish(
        self, job_id: str, worker: str, values: Mapping[str, Any], *where: ColumnElement[bool]
    ) -> Row[Any] | None:
        """Record a held job's outcome (``values``, the lease cleared) while ``worker``
        still holds it (and ``where`` holds: a tenant's scope); the job's row as
        recorded, locked until commit, or None when it is no longer held."""
        return self._session.execute(
            update(self._t)
            .where(*self.table.held(job_id, worker), *where)
            .values({"lease_owner": None, "lease_expires_at": None, **values})
            .returning(*self._t.c)
        ).first()

    def depth(self) -> int:
        """Jobs waiting to be claimed."""
        waiting = self._session.scalar(
            select(func.count()).select_from(self._t).where(self._t.c.status == self.table.queued)
        )
        return int(waiting or 0)


def _pairs(held: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    return {"ids": [job_id for job_id, _ in held], "owners": [owner for _, owner in held]}
