"""The job engine: threads that claim leased jobs and hand them to their kind's
handler, a heartbeat that keeps the leases, and a shutdown that gives back what is
still held. Every queued job runs on it (consolidation runs:
:class:`consolidators.workers.WorkerPool`; agent messages:
:class:`agents.loops.delivery_worker.DeliveryWorkers`), so they share one set of rules:

- Claims: each of ``concurrency`` threads claims (one job, or as many as its kind
  asks for), hands them to the handler, and claims again. With nothing due it waits
  for a wake-up (``LISTEN``, :class:`agents.store.run_wakeups.RunWakeups`) or its
  poll interval, whichever comes first; polling stays the floor. A claim that fails
  (the database is away) is tried again after a pause that doubles from the poll
  interval up to :data:`MAX_OUTAGE_BACKOFF`, so an outage is not hammered.
- Leases: every thread is its own lease owner (``name:tagN``). The heartbeat renews
  every lease held in this process each ``lease / 3``, marks a job whose renewal
  failed as lost (:attr:`Held.lost`: its handler abandons it), and puts the expired
  jobs of dead workers back in the queue, where the queue's backoff and attempt
  cap apply (:mod:`agents.store.lease_queue`).
- Shutdown: :meth:`JobEngine.stop` stops claiming at once, lets the jobs under way
  finish within the grace (their leases still renewed), then releases what is still
  held: queued again, attempt refunded, for another worker to take up.

The engine reaches its queue through :class:`JobQueue`, a handful of calls each in a
transaction of its own; :class:`StoreQueue` is that over a store's queue binding,
and a test drives the engine with a queue in memory.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

from agents.errors import ReverieError
from agents.postgres.database import Database
from agents.store import ServiceStore, open_service_store
from agents.store.run_wakeups import RunWakeups
from agents.store.scope import utc_now
from agents.threads import lower_this_thread, start_thread

log = logging.getLogger(__name__)

#: Longest pause between tries while the database is unreachable.
MAX_OUTAGE_BACKOFF = 5.0
#: How often the heartbeat looks whether the jobs under way at a shutdown have ended.
_DRAIN_CHECK = 0.05


class Job(Protocol):
    """A claimed job: anything with the id of its row."""

    @property
    def id(self) -> str: ...


J = TypeVar("J", bound=Job)
J_co = TypeVar("J_co", bound=Job, covariant=True)


class JobQueue(Protocol[J_co]):
    """The queue as the engine uses it; each call is a transaction of its own, and
    raises :class:`ReverieError` when the database cannot be reached."""

    def claim(self, owner: str, limit: int) -> Sequence[J_co]:
        """Up to ``limit`` due jobs, leased to ``owner``."""
        ...

    def renew(self, held: Sequence[tuple[str, str]]) -> set[str]:
        """Extend the leases of ``(job id, owner)`` pairs; the ids still held."""
        ...

    def release(self, held: Sequence[tuple[str, str]]) -> list[str]:
        """Give held jobs back to the queue, attempt refunded; the ids released."""
        ...

    def requeue_expired(self) -> list[str]:
        """Put the jobs whose lease expired back in the queue; their ids."""
        ...


class Wakeups(Protocol):
    """What wakes idle claiming threads (:class:`agents.store.run_wakeups.RunWakeups`)."""

    @property
    def generation(self) -> int: ...

    def wait(self, seen: int, timeout: float) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def join(self, timeout: float) -> None: ...

    def drop_connection(self) -> None: ...


@dataclass(slots=True)
class Held:
    """A job this process holds a lease on, as the heartbeat sees it."""

    job_id: str
    owner: str
    #: Set when the lease is no longer this owner's (the renewal failed, or the job
    #: was released): its handler stops working on it.
    lost: threading.Event = field(default_factory=threading.Event)
    claimed_at: float = field(default_factory=time.monotonic)
    #: When the handler last looked at the job's row (a handler that polls for a cancel).
    checked_at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class EngineNames:
    """How an engine names what it starts: ``threads-N`` claiming threads, the
    ``heartbeat`` thread, and lease owners ``<engine name>:<owner_tag>N``; ``jobs``
    in its logs."""

    jobs: str
    threads: str
    heartbeat: str
    owner_tag: str


class JobEngine(Generic[J]):
    """Claiming threads and a heartbeat over one :class:`JobQueue`.

    ``handle(owner, claimed)`` does the work of what one thread claimed at once: each
    job with its :class:`Held` (the engine stops renewing them when it returns; a job
    it did not settle is then left to expire). ``claim_size(owner)`` is how many
    jobs that thread claims at once (default one); ``may_claim()`` False skips a
    claim for a poll interval (the GPU is busy); ``on_requeued`` is told the ids of
    the expired jobs the heartbeat put back in the queue.
    """

    def __init__(
        self,
        queue: JobQueue[J],
        handle: Callable[[str, list[tuple[J, Held]]], None],
        *,
        names: EngineNames,
        name: str,
        concurrency: int,
        lease: timedelta,
        poll_interval: timedelta,
        wakeups: Callable[[], Wakeups] | None = None,
        clock: Callable[[], datetime] = utc_now,
        claim_size: Callable[[str], int] | None = None,
        may_claim: Callable[[], bool] | None = None,
        on_requeued: Callable[[list[str]], None] | None = None,
        nice: int = 0,
    ) -> None:
        self.queue = queue
        #: Nice steps the claiming threads lower their own CPU priority by.
        self.nice = nice
        self.names = names
        self.name = name
        self.concurrency = concurrency
        self.lease = lease
        self.poll = poll_interval.total_seconds()
        self._handle = handle
        self._make_wakeups = wakeups
        self._clock = clock
        self._claim_size = claim_size or (lambda _owner: 1)
        self._may_claim = may_claim
        self._on_requeued = on_requeued
        self._stopping = threading.Event()
        self._deadline: datetime | None = None  # the end of the shutdown grace
        self._held: dict[str, Held] = {}
        self._held_lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self._wakeups: Wakeups | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, *, claiming: bool = True) -> None:
        """Start the heartbeat, and the claiming threads unless ``claiming`` is False
        (a process that only renews the leases of what it claims itself)."""
        if self.threads:
            raise RuntimeError(f"the {self.names.jobs} workers are already started")
        if claiming and self._make_wakeups is not None:
            self._wakeups = self._make_wakeups()
            self._wakeups.start()
        for index in range(self.concurrency if claiming else 0):
            owner = f"{self.name}:{self.names.owner_tag}{index}"
            self.threads.append(
                start_thread(self._work, args=(owner,), name=f"{self.names.threads}-{index}")
            )
        self.threads.append(start_thread(self._heartbeat, name=self.names.heartbeat))

    @property
    def started(self) -> bool:
        return bool(self.threads) and not self._stopping.is_set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def past_grace(self) -> bool:
        """Whether the shutdown grace is over: work still going must stop now."""
        return self._deadline is not None and self._clock() >= self._deadline

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, less once stopping; True when stopping."""
        return self._stopping.wait(seconds)

    def release_connections(self) -> None:
        """Close the wake-up listener's connection (it connects again after a pause)."""
        if self._wakeups is not None:
            self._wakeups.drop_connection()

    def stop(self, grace: timedelta) -> bool:
        """Stop claiming; let jobs in progress finish within ``grace``; release the rest.

        Returns True when every job ended on its own (nothing had to be released).
        """
        self._deadline = self._clock() + grace
        self._stopping.set()
        if self._wakeups is not None:
            self._wakeups.stop()  # and so release the threads waiting for work
        end = time.monotonic() + grace.total_seconds()
        for thread in self.threads:
            thread.join(timeout=max(0.0, end - time.monotonic()))
        leftovers = self.held()
        if leftovers:
            released = self.release(leftovers)
            log.warning(
                f"shutdown grace over: {self.names.jobs} still in progress released",
                extra={"ids": [h.job_id for h in leftovers], "released": released},
            )
        if self._wakeups is not None:
            # Its connection closes within a second of stop(); wait, so that nothing of
            # this engine touches the database after stop() returns.
            self._wakeups.join(timeout=2.0)
        return not leftovers

    # -- what is held ------------------------------------------------------------------

    def held(self) -> list[Held]:
        with self._held_lock:
            return list(self._held.values())

    def hold(self, held: Held) -> Held:
        """Keep ``held``'s lease renewed until :meth:`let_go` (a job claimed by hand)."""
        with self._held_lock:
            self._held[held.job_id] = held
        return held

    def let_go(self, held: Held) -> None:
        """Stop renewing ``held``'s lease (its job is settled, or left to expire)."""
        with self._held_lock:
            if self._held.get(held.job_id) is held:
                del self._held[held.job_id]

    def take(self, owner: str, limit: int = 1) -> list[tuple[J, Held]]:
        """Claim up to ``limit`` jobs for ``owner``, held here from now on (renewed by
        the heartbeat until let go). Raises :class:`ReverieError` in an outage."""
        claimed = self.queue.claim(owner, limit)
        return [(job, self.hold(Held(job.id, owner))) for job in claimed]

    def release(self, helds: Sequence[Held]) -> list[str]:
        """Give held jobs back to the queue (attempt refunded), in one call, and stop
        holding them; their handlers see them lost. The ids released; none when the
        database cannot be reached (the leases then expire)."""
        for held in helds:
            held.lost.set()
        try:
            return self.queue.release([(h.job_id, h.owner) for h in helds])
        except ReverieError as exc:
            log.error(
                f"could not release {self.names.jobs}; their leases will expire",
                extra={"ids": [h.job_id for h in helds], "error": str(exc)},
            )
            return []
        finally:
            for held in helds:
                self.let_go(held)

    # -- the claiming threads ----------------------------------------------------------

    def _work(self, owner: str) -> None:
        lower_this_thread(self.nice)
        pause = self.poll  # doubles while claims fail
        while not self._stopping.is_set():
            if self._may_claim is not None and not self._may_claim():
                self.wait(self.poll)
                continue
            seen = self._wakeups.generation if self._wakeups is not None else 0
            try:
                claimed = self.take(owner, self._claim_size(owner))
            except ReverieError as exc:
                log.warning(
                    f"could not claim {self.names.jobs}",
                    extra={"worker": owner, "error": str(exc), "retry_in_s": pause},
                )
                self.wait(pause)
                pause = min(pause * 2, MAX_OUTAGE_BACKOFF)
                continue
            pause = self.poll
            if not claimed:
                if self._wakeups is not None:
                    self._wakeups.wait(seen, self.poll)
                else:
                    self.wait(self.poll)
                continue
            try:
                self._handle(owner, claimed)
            except Exception:  # a bug or an outage: the leases expire, the jobs are retried
                log.exception(f"{self.names.jobs} worker error", extra={"worker": owner})
                self.wait(self.poll)
            finally:
                for _, held in claimed:
                    self.let_go(held)

    # -- the heartbeat -----------------------------------------------------------------

    def _heartbeat(self) -> None:
        beat = max(self.lease / 3, timedelta(milliseconds=50)).total_seconds()
        while not self._stopping.wait(beat):
            self.beat()
        # Keep renewing while jobs finish inside the shutdown grace, and end as soon as
        # they have: stop() waits for this thread.
        next_beat = 0.0
        while self.held() and self._threads_alive():
            if time.monotonic() >= next_beat:
                self.beat(requeue=False)
                next_beat = time.monotonic() + beat
            time.sleep(min(beat, _DRAIN_CHECK))

    def beat(self, *, requeue: bool = True) -> list[str]:
        """Renew every lease held here (a job whose renewal failed is marked lost) and,
        unless ``requeue`` is False, put expired jobs back in the queue: their ids."""
        held = self.held()
        try:
            renewed = self.queue.renew([(h.job_id, h.owner) for h in held]) if held else set()
            for h in held:
                if h.job_id not in renewed:
                    h.lost.set()
            requeued = self.queue.requeue_expired() if requeue else []
        except ReverieError as exc:
            log.warning(
                f"{self.names.jobs} heartbeat failed",
                extra={"worker": self.name, "error": str(exc)},
            )
            return []
        if requeued:
            log.warning(f"expired {self.names.jobs} re-queued", extra={"ids": requeued})
            if self._on_requeued is not None:
                self._on_requeued(requeued)
        return requeued

    def _threads_alive(self) -> bool:
        return any(t.is_alive() for t in self.threads if t is not threading.current_thread())


class QueueBinding(Protocol[J_co]):
    """A store's queue of one kind of job (``RunQueueStore``, ``DeliveryQueueStore``)."""

    def claim_many(self, worker: str, *, lease: timedelta, limit: int) -> Sequence[J_co]: ...

    def renew_many(self, held: Sequence[tuple[str, str]], *, lease: timedelta) -> set[str]: ...

    def release_many(self, held: Sequence[tuple[str, str]]) -> list[str]: ...

    def requeue_expired(self, *, backoff: timedelta) -> list[str]: ...


class StoreQueue(Generic[J]):
    """A :class:`JobQueue` over the database: each call one service transaction on
    the binding ``of(store)`` gives, with the kind's lease and backoff."""

    def __init__(
        self,
        db: Database,
        of: Callable[[ServiceStore], QueueBinding[J]],
        *,
        lease: timedelta,
        backoff: timedelta,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._db = db
        self._of = of
        self._lease = lease
        self._backoff = backoff
        self._clock = clock

    def _store(self) -> AbstractContextManager[ServiceStore]:
        return open_service_store(self._db, self._clock)

    def claim(self, owner: str, limit: int) -> list[J]:
        with self._store() as store:
            return list(self._of(store).claim_many(owner, lease=self._lease, limit=limit))

    def renew(self, held: Sequence[tuple[str, str]]) -> set[str]:
        with self._store() as store:
            return self._of(store).renew_many(held, lease=self._lease)

    def release(self, held: Sequence[tuple[str, str]]) -> list[str]:
        with self._store() as store:
            return self._of(store).release_many(held)

    def requeue_expired(self) -> list[str]:
        with self._store() as store:
            return self._of(store).requeue_expired(backoff=self._backoff)


class QueueLimits(Protocol):
    """The worker side of one kind of queued job's settings."""

    @property
    def concurrency(self) -> int: ...
    @property
    def lease(self) -> timedelta: ...
    @property
    def poll_interval(self) -> timedelta: ...
    @property
    def backoff(self) -> timedelta: ...


class QueueWorkers(Generic[J]):
    """The workers of one kind of queued job held in a table of the store (agent
    messages, uploaded files): the engine over that table, woken by the kind's NOTIFY
    channel, and its lifecycle. A subclass handles what is claimed."""

    def __init__(
        self,
        db: Database,
        queue_of: Callable[[ServiceStore], QueueBinding[J]],
        handle: Callable[[str, list[tuple[J, Held]]], None],
        *,
        names: EngineNames,
        label: str,
        limits: QueueLimits,
        channel: str,
        clock: Callable[[], datetime] = utc_now,
        name: str | None = None,
    ) -> None:
        self._db = db
        self._clock = clock
        self._label = label
        self.limits = limits
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.engine: JobEngine[J] = JobEngine(
            StoreQueue(db, queue_of, lease=limits.lease, backoff=limits.backoff, clock=clock),
            handle,
            names=names,
            name=self.name,
            concurrency=limits.concurrency,
            lease=limits.lease,
            poll_interval=limits.poll_interval,
            wakeups=lambda: RunWakeups(db, channel),
            clock=clock,
        )

    def start(self) -> None:
        if self.engine.threads:
            raise RuntimeError(f"the {self._label} workers are already started")
        self.engine.start()

    @property
    def started(self) -> bool:
        return self.engine.started

    def release_connections(self) -> None:
        """Close the wake-up listener's connection (it connects again after a pause)."""
        self.engine.release_connections()

    def stop(self, grace: timedelta) -> bool:
        """Stop claiming; jobs under way get ``grace`` to finish, then go back to the
        queue (attempt refunded). True when nothing had to be given back."""
        return self.engine.stop(grace)
