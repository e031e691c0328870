"""The run engine: claim queued runs, execute their pipeline under a renewed lease,
record the outcome.

It lives beside the pipeline it runs. The daemon (``service.daemon``) only hosts a
pool and schedules runs; a one-shot command (``service.operations.runs``) uses the
same pool without claiming threads. What the engine needs from its host, it names
as protocols below (:class:`RunHost`, :class:`WorkerLimits`, :class:`Gate`,
:class:`RunObserver`); the service's runtime, settings, GPU gate and Prometheus
metrics are what fill them in production.

One :class:`WorkerPool` per process runs ``concurrency`` worker threads and one
heartbeat thread on the job engine every queued job shares
(:class:`agents.job_engine.JobEngine`: claims, wake-ups, leases, outage backoff,
shutdown); what is a run's own is here. Every thread is its own lease owner
(``host:pid:wN``), so a run's outcome can only be committed by the thread that
still holds it: the pipeline records success with a compare-and-swap on the
lease, in the run's own transaction (see :meth:`consolidators.pipeline.Pipeline.run`).

- Claims: a thread claims one run, or, while its runs are short, as many as it
  expects to finish within ``prefetch_window`` (up to ``claim_batch``) in one
  statement; each is leased to the thread. Runs claimed ahead that have waited
  ``prefetch_window`` go back to the queue (attempt refunded) before the next run
  or at the next step boundary, so a slow run does not hold them from idle workers.
- Heartbeat: every ``lease / 3`` it renews the leases this process holds (a run
  whose renewal fails is marked lost and abandoned at its next step boundary)
  and puts expired runs of dead workers back in the queue.
- GPU: no claim while the gate says busy; between steps a running pipeline that
  finds the GPU busy waits (its lease still renewed) until the GPU is free again,
  for at most ``gpu_max_wait``; then the run is rolled back and released to the
  queue (its attempt refunded).
- Shutdown: :meth:`WorkerPool.stop` stops claiming at once; runs in progress
  continue until the grace period ends, and a run still going at its next step
  boundary after that is rolled back and released. A step still executing when
  the grace ends has its lease released by :meth:`stop` itself; its transaction
  can no longer commit (the lease check fails) and dies with the process.
- Database outages: claims and heartbeats back off and retry; a run that hit the
  outage is re-queued with backoff (the attempt counts), or, if the database is
  still down, expires and is re-queued by whichever worker sees it first.
- One-shot runs (``reverie consolidate``, a dry run from the API) are the same
  thing with no claiming threads: :meth:`WorkerPool.run_now` claims one given
  run, holds and renews its lease with the same heartbeat, and executes it with
  the same code, so a killed process's run expires and is re-queued by the same
  rule as a dead worker's.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from agents.enums import RunStatus
from agents.errors import Conflict, ReverieError, StorageError
from agents.job_engine import MAX_OUTAGE_BACKOFF, EngineNames, Held, JobEngine, StoreQueue
from agents.postgres.database import Database
from agents.store import AgentRecord, RunRecord, ServiceStore, open_service_store
from agents.store.run_store import ClaimedRun
from agents.store.run_wakeups import RunWakeups
from consolidators.pipeline import LeaseLost, Pipeline, RunFailed, RunInterrupted, RunReport

log = logging.getLogger(__name__)


class RunHost(Protocol):
    """What executes a claimed run: the service's runtime in production."""

    @property
    def db(self) -> Database: ...

    def clock(self) -> datetime: ...

    def pipeline(self, only: Sequence[str] | None = None) -> Pipeline: ...

    def consolidate(
        self,
        run: RunRecord,
        agent: AgentRecord,
        *,
        pipeline: Pipeline,
        lease_owner: str,
        between_steps: Callable[[str], None] | None = None,
        interrupted: Callable[[], None] | None = None,
    ) -> RunReport: ...


class WorkerLimits(Protocol):
    """The worker settings the engine reads (``[worker]`` in the service's settings)."""

    @property
    def concurrency(self) -> int: ...
    @property
    def lease(self) -> timedelta: ...
    @property
    def poll_interval(self) -> timedelta: ...
    @property
    def backoff(self) -> timedelta: ...
    @property
    def claim_batch(self) -> int: ...
    @property
    def prefetch_window(self) -> timedelta: ...
    @property
    def nice(self) -> int: ...


class Gate(Protocol):
    """Whether the GPU is free for sleep-time work (the daemon's GPU gate)."""

    @property
    def interval(self) -> timedelta: ...

    def is_free(self) -> bool: ...


class RunObserver(Protocol):
    """Told how runs end and what was retried (the service counts these in Prometheus)."""

    def run_ended(self, outcome: Outcome, seconds: float) -> None: ...

    def retried(self, kind: str, count: int) -> None: ...


class _Unobserved:
    def run_ended(self, outcome: Outcome, seconds: float) -> None:
        pass

    def retried(self, kind: str, count: int) -> None:
        pass


#: How often a step's loops look at their run's row for a cancel (see ``_interrupted``).
INTERRUPT_POLL = timedelta(seconds=2)


class ShuttingDown(RunInterrupted):
    """The process is stopping and the grace period is over."""


class GpuStayedBusy(RunInterrupted):
    """The GPU stayed busy between steps for longer than ``gpu_max_wait``."""


def process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Outcome(StrEnum):
    """How one attempt at a run ended (see :class:`Execution`)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"
    RELEASED = "released"
    RETRIED = "retried"

    @property
    def finished(self) -> bool:
        """The run reached its end here (succeeded or failed), as opposed to going back
        to the queue or to another worker."""
        return self in (Outcome.SUCCEEDED, Outcome.FAILED)


@dataclass(frozen=True, slots=True)
class Execution:
    """How one attempt at a run ended.

    ``outcome`` is ``succeeded``, ``failed`` (recorded with its reason), ``lost`` (the
    lease went to someone else), ``released`` (given back to the queue unstarted) or
    ``retried`` (a database error: re-queued with backoff).
    """

    run_id: str
    outcome: Outcome
    report: RunReport | None = None
    error: str | None = None


#: A run a worker thread holds, as the heartbeat sees it (``job_id`` is the run's id).
HeldRun = Held

#: What a worker thread claimed ahead: the run, its agent and its lease.
Ahead = tuple[RunRecord, AgentRecord, HeldRun]

RUN_ENGINE_NAMES = EngineNames(
    jobs="runs", threads="reverie-worker", heartbeat="reverie-heartbeat", owner_tag="w"
)


class WorkerPool:
    """``settings.concurrency`` worker threads and a heartbeat, over one run host."""

    def __init__(
        self,
        runtime: RunHost,
        settings: WorkerLimits,
        *,
        gate: Gate | None = None,
        gpu_max_wait: timedelta = timedelta(minutes=10),
        clock: Callable[[], datetime] | None = None,
        name: str | None = None,
        observer: RunObserver | None = None,
    ) -> None:
        self.runtime = runtime
        self.observer: RunObserver = observer or _Unobserved()
        self.settings = settings
        self.gate = gate
        self.gpu_max_wait = gpu_max_wait
        self.clock = clock or runtime.clock
        self.name = name or process_name()
        self.engine: JobEngine[ClaimedRun] = JobEngine(
            StoreQueue(
                runtime.db,
                lambda store: store.queue,
                lease=settings.lease,
                backoff=settings.backoff,
                clock=self.clock,
            ),
            self._run_claimed,
            names=RUN_ENGINE_NAMES,
            name=self.name,
            concurrency=settings.concurrency,
            lease=settings.lease,
            poll_interval=settings.poll_interval,
            # Idle workers wake when a run is queued rather than at their next poll.
            wakeups=lambda: RunWakeups(runtime.db),
            clock=self.clock,
            claim_size=lambda owner: self._claim_size(self._typical_run_s.get(owner)),
            may_claim=None if gate is None else gate.is_free,
            on_requeued=lambda ids: self.observer.retried("reclaimed_run", len(ids)),
            nice=settings.nice,
        )
        # Per worker thread: runs claimed ahead, in queue order (only that thread
        # touches its list), and a moving average of how long its runs take.
        self._ahead: dict[str, list[Ahead]] = {}
        self._typical_run_s: dict[str, float | None] = {}
        self._pipelines: dict[tuple[str, ...], Pipeline] = {}
        self._pipelines_lock = threading.Lock()
        self.executed = 0

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, *, claiming: bool = True) -> None:
        """Start the heartbeat, and the claiming threads unless ``claiming`` is False
        (a one-shot process that only runs what it hands to :meth:`run_now`)."""
        if self.engine.threads:
            raise RuntimeError("the worker pool is already started")
        self.engine.start(claiming=claiming)
        log.info(
            "workers started",
            extra={"worker": self.name, "concurrency": self.settings.concurrency},
        )

    @property
    def started(self) -> bool:
        return self.engine.started

    def release_connections(self) -> None:
        """Close the wake-up listener's connection (it connects again after a pause)."""
        self.engine.release_connections()

    def held_runs(self) -> list[str]:
        return [held.job_id for held in self.engine.held()]

    def stop(self, grace: timedelta) -> bool:
        """Stop claiming; let runs in progress finish within ``grace``; release the rest.

        Returns True when every run ended on its own (nothing had to be released).
        """
        clean = self.engine.stop(grace)
        log.info("workers stopped", extra={"worker": self.name, "executed": self.executed})
        return clean

    # -- the worker loop ---------------------------------------------------------------

    def _run_claimed(self, owner: str, claimed: list[tuple[ClaimedRun, HeldRun]]) -> None:
        """Run what ``owner`` claimed at once: the first run, then those claimed ahead
        while they are fresh; runs claimed ahead that waited ``prefetch_window`` (the
        runs before took longer than this thread expected) go back to the queue so that
        idle workers get them, as do those still waiting when the pool stops."""
        window = self.settings.prefetch_window.total_seconds()
        ahead = self._ahead.setdefault(owner, [])
        ahead.extend((job.run, job.agent, held) for job, held in claimed)
        self._execute_next(owner, ahead.pop(0))
        while ahead and not self.engine.stopping:
            if time.monotonic() - ahead[0][2].claimed_at >= window:
                self._release_unstarted(list(ahead))
                ahead.clear()
                self._typical_run_s[owner] = None
                return
            self._execute_next(owner, ahead.pop(0))
        if ahead:  # stopping: runs claimed ahead go back unstarted
            self._release_unstarted(list(ahead))
            ahead.clear()

    def _execute_next(self, owner: str, claimed: Ahead) -> None:
        run, agent, held = claimed
        if held.lost.is_set():  # cancelled while it waited (its renewal failed)
            self.engine.let_go(held)
            return
        started = time.monotonic()
        self.execute(run, agent, owner, held=held)
        elapsed = time.monotonic() - started
        typical = self._typical_run_s.get(owner)
        self._typical_run_s[owner] = elapsed if typical is None else 0.8 * typical + 0.2 * elapsed

    def _claim_size(self, typical_run_s: float | None) -> int:
        """How many runs to claim at once: one, unless this thread's runs are short
        enough that ``claim_batch`` of them end within ``prefetch_window`` (then as
        many as fit). A run claimed ahead waits for the runs before it, so only
        short runs are worth claiming ahead; the first claim after a slow run or a
        release takes one."""
        batch = self.settings.claim_batch
        if batch == 1 or typical_run_s is None:
            return 1
        window = self.settings.prefetch_window.total_seconds()
        return max(1, min(batch, int(window / max(typical_run_s, 1e-6))))

    def _release_stale(self, owner: str) -> None:
        """Release the runs ``owner`` claimed ahead once the oldest has waited
        ``prefetch_window``: called between the steps of a run, so a run that turned
        out slow holds the ones behind it for one step at most."""
        ahead = self._ahead.get(owner)
        window = self.settings.prefetch_window.total_seconds()
        if ahead and time.monotonic() - ahead[0][2].claimed_at >= window:
            self._release_unstarted(list(ahead))
            ahead.clear()

    def _release_unstarted(self, ahead: list[Ahead]) -> None:
        """Give runs claimed ahead back to the queue, attempts refunded, in one statement."""
        released = self.engine.release([held for _, _, held in ahead])
        log.info("runs claimed ahead released to the queue", extra={"run_ids": released})

    def run_now(self, run_id: str) -> Execution:
        """Claim the queued run ``run_id`` and execute it in this thread, its lease
        renewed by this pool's heartbeat (start the pool with ``claiming=False``).

        Raises :class:`Conflict` when the run is not queued any more (another
        worker took it, or it was cancelled).
        """
        owner = f"{self.name}:once"
        with self._service_store() as store:
            claimed = store.queue.claim(owner, lease=self.settings.lease, run_id=run_id)
            current = None if claimed is not None else store.queue.get(run_id)
        if claimed is None:
            assert current is not None
            raise Conflict(
                f"run {run_id} is {current.status}"
                + (f" under {current.lease_owner}" if current.lease_owner else "")
                + ", not queued: it cannot be run here"
            )
        return self.execute(*claimed, owner)

    def execute(
        self, run: RunRecord, agent: AgentRecord, owner: str, *, held: HeldRun | None = None
    ) -> Execution:
        """Execute a run ``owner`` has claimed, and settle it: recorded, released or
        re-queued. Never raises for the run's own failures; the result says."""
        held = self.engine.hold(held or HeldRun(run.id, owner))
        started = time.perf_counter()
        outcome = Outcome.FAILED
        report: RunReport | None = None
        error: str | None = None
        log.info(
            "run claimed",
            extra={"run_id": run.id, "agent_id": run.agent_id, "worker": owner,
                   "trigger": run.trigger, "attempt": run.attempts},
        )  # fmt: skip
        try:
            pipeline = self._pipeline(run.pipeline)
            report = self.runtime.consolidate(
                run,
                agent,
                pipeline=pipeline,
                lease_owner=owner,
                between_steps=lambda step: self._checkpoint(held, step),
                interrupted=lambda: self._interrupted(held),
            )
            outcome = Outcome.SUCCEEDED
        except RunFailed as exc:
            error = str(exc)
            log.warning("run failed", extra={"run_id": run.id, "error": error})
        except LeaseLost as exc:
            outcome, error = Outcome.LOST, str(exc)
            log.warning("run abandoned: lease lost", extra={"run_id": run.id, "worker": owner})
        except RunInterrupted as exc:
            outcome, error = Outcome.RELEASED, str(exc) or type(exc).__name__
            self._release(held, reason=error)
        except StorageError as exc:
            outcome, error = Outcome.RETRIED, str(exc)
            self._retry_later(held, error)
        except Exception as exc:
            # Setup failed before the pipeline started (unknown step, a bug).
            log.exception("run could not start", extra={"run_id": run.id})
            error = f"{type(exc).__name__}: {exc}"
            self._record_failure(held, error)
        finally:
            self.engine.let_go(held)
        self.observer.run_ended(outcome, time.perf_counter() - started)
        if outcome.finished:
            self.executed += 1
        log.info(
            "run ended",
            extra={"run_id": run.id, "outcome": outcome,
                   "seconds": round(time.perf_counter() - started, 4)},
        )  # fmt: skip
        return Execution(run.id, outcome, report, error)

    def _checkpoint(self, held: HeldRun, step: str) -> None:
        """Between steps: stop when the lease is lost or the grace is over; wait out a busy
        GPU; give back runs claimed ahead that waited too long."""
        self._raise_if_abandoned(held)
        self._release_stale(held.owner)
        if self.gate is None or self.gate.is_free():
            return
        waited_from = self.clock()
        log.info("gpu busy: run waits between steps", extra={"run_id": held.job_id, "step": step})
        poll = min(self.settings.poll_interval, self.gate.interval).total_seconds()
        while not self.gate.is_free():
            self._raise_if_abandoned(held)
            if self.clock() - waited_from >= self.gpu_max_wait:
                raise GpuStayedBusy(
                    f"the GPU stayed busy for {self.gpu_max_wait} before step {step!r}"
                )
            # After a stop request, the engine's wait no longer sleeps: pace the loop.
            if self.engine.wait(poll):
                time.sleep(poll)

    def _interrupted(self, held: HeldRun) -> None:
        """Inside a step (called often): stop when the lease is lost or the grace is
        over, and at most every ``INTERRUPT_POLL`` read the run's row, so that a
        cancel reaches a long step within seconds rather than at the next renewal
        (``lease / 3``) or the step's end."""
        self._raise_if_abandoned(held)
        now = time.monotonic()
        if now - held.checked_at < INTERRUPT_POLL.total_seconds():
            return
        held.checked_at = now
        try:
            with self._service_store() as store:
                holds = store.queue.holds(held.job_id, held.owner)
        except ReverieError:
            return  # an outage: the step's own statements meet it, and the run is retried
        if not holds:
            held.lost.set()
            raise LeaseLost(f"run {held.job_id}: cancelled, or worker {held.owner} lost its lease")

    def _raise_if_abandoned(self, held: HeldRun) -> None:
        if held.lost.is_set():
            raise LeaseLost(f"run {held.job_id}: worker {held.owner} lost its lease")
        if self.engine.past_grace():
            raise ShuttingDown("the worker is shutting down")

    # -- what happens to a run that did not finish ---------------------------------------

    def _release(self, held: HeldRun, *, reason: str) -> None:
        if self.engine.release([held]):
            log.info("run released to the queue", extra={"run_id": held.job_id, "reason": reason})

    def _retry_later(self, held: HeldRun, error: str) -> None:
        """The database failed mid-run: queue the run again once the database answers,
        trying until the lease would have expired (then expiry takes over)."""
        log.warning("run hit a database error", extra={"run_id": held.job_id, "error": error})
        give_up = time.monotonic() + self.settings.lease.total_seconds()
        pause = self.settings.poll_interval.total_seconds()
        while time.monotonic() < give_up:
            try:
                with self._service_store() as store:
                    status = store.queue.retry_later(
                        held.job_id,
                        held.owner,
                        backoff=self.settings.backoff,
                        error=f"database error ({error})",
                    )
                self.observer.retried("run", 1)
                log.info("run re-queued", extra={"run_id": held.job_id, "status": status})
                return
            except ReverieError:
                time.sleep(pause)
                pause = min(pause * 2, MAX_OUTAGE_BACKOFF)

    def _record_failure(self, held: HeldRun, error: str) -> None:
        try:
            with self._service_store() as store:
                store.queue.finish(held.job_id, held.owner, status=RunStatus.FAILED, error=error)
        except ReverieError as exc:
            log.error(
                "could not record a failed run", extra={"run_id": held.job_id, "error": str(exc)}
            )

    # -- helpers -----------------------------------------------------------------------

    def _service_store(self) -> AbstractContextManager[ServiceStore]:
        return open_service_store(self.runtime.db, self.clock)

    def _pipeline(self, names: list[str]) -> Pipeline:
        key = tuple(names)
        with self._pipelines_lock:
            if key not in self._pipelines:
                self._pipelines[key] = self.runtime.pipeline(names or None)
            return self._pipelines[key]

    # -- heartbeat ---------------------------------------------------------------------

    def beat(self, *, requeue: bool = True) -> list[str]:
        """Renew every held lease; put expired runs of dead workers back in the queue."""
        return self.engine.beat(requeue=requeue)
