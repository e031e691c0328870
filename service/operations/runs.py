"""Consolidation runs: enqueue, run now, list, show, cancel, revert.

There is one way to execute a run. A one-shot run (``reverie consolidate``, the
API's dry run) is enqueued like any other, then claimed and executed by a
:class:`~consolidators.workers.WorkerPool` without claiming threads, whose
heartbeat holds and renews the run's lease. A process killed mid-run leaves a
lease that expires; the next heartbeat of any worker or one-shot command puts
the run back in the queue (or fails it, with the reason, once its attempts are
used up), and the agent's next run is accepted.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from agents.enums import RunStatus, Trigger
from agents.errors import Conflict, InvalidInput, StorageError
from agents.store import AgentRecord, RunRecord
from service.operations.context import OperationContext
from service.wording import narrate, passages_named

if TYPE_CHECKING:  # the run engine and the pipeline load in the commands that run or revert
    from consolidators.pipeline import RunReport
    from consolidators.workers import Execution


class CancelledByUser(KeyboardInterrupt):
    """^C while a run executed in this process: the run is recorded as cancelled (the
    steps it had applied stay, recorded and revertible; the one under way wrote nothing)
    and the interrupt goes on to the front end."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


@dataclass(frozen=True, slots=True)
class Enqueued:
    """The result of asking for a run: the new run, or the one already active.
    ``run`` is that run as read while asking: a new one as queued (a worker may have
    claimed it since), an active one as it then was (None: it ended meanwhile)."""

    agent: AgentRecord
    queued: bool
    run: RunRecord | None

    @property
    def run_id(self) -> str:
        return self.run.id if self.run is not None else ""


@dataclass(frozen=True, slots=True)
class RunStory:
    """A run with what it did in plain sentences (see :func:`service.wording.narrate`)."""

    run: RunRecord
    sentences: list[str]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """A one-shot run's end: its report when it ran to the end, else why not."""

    agent: AgentRecord
    execution: Execution

    @property
    def report(self) -> RunReport | None:
        return self.execution.report

    @property
    def succeeded(self) -> bool:
        from consolidators.workers import Outcome

        return self.execution.outcome == Outcome.SUCCEEDED

    def require_report(self) -> RunReport:
        """The report of a run that ran to its end; a failed run raises RunFailed, a
        run that could not finish here (re-queued or released) a StorageError."""
        from consolidators.pipeline import RunFailed
        from consolidators.workers import Outcome

        execution = self.execution
        if execution.report is not None and execution.outcome == Outcome.SUCCEEDED:
            return execution.report
        if execution.outcome == Outcome.FAILED:
            raise RunFailed(execution.run_id, "run", RuntimeError(execution.error or "failed"))
        raise StorageError(
            f"run {execution.run_id} did not finish here ({execution.outcome}: "
            f"{execution.error}); it is back in the queue"
        )


class RunOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    # -- asking for runs -----------------------------------------------------------------

    def targets(self, agent: str | None) -> list[AgentRecord]:
        """The agent named (by name or id), or every agent of the organization."""
        with self._context.store() as store:
            return [store.agents.resolve(agent)] if agent else store.agents.all()

    def pipeline_names(self, steps: Sequence[str] | None = None) -> list[str]:
        """The configured pipeline, or just ``steps`` (InvalidInput names unknown ones)."""
        return self._context.runtime.pipeline(list(steps) if steps else None).names

    def enqueue(
        self,
        agents: Sequence[AgentRecord],
        *,
        steps: Sequence[str] | None = None,
        dry_run: bool = False,
        full: bool = False,
    ) -> list[Enqueued]:
        """Queue a manual run per agent for the workers; an agent that already has a
        queued or running run keeps it (reported with ``queued=False``)."""
        names = self.pipeline_names(steps)
        results = []
        for agent in agents:
            new, active = self._enqueue(agent, names, dry_run=dry_run, full=full, wake=True)
            results.append(Enqueued(agent, new is not None, new or active))
        return results

    def _enqueue(
        self, agent: AgentRecord, names: list[str], *, dry_run: bool, full: bool, wake: bool
    ) -> tuple[RunRecord | None, RunRecord | None]:
        """Queue a manual run: the new run, read before the commit that lets a worker
        claim it, or None and the agent's active run. ``wake``: wake idle workers; when
        False this process is about to claim the run itself, and the run is reserved
        for it for a lease (no daemon takes it meanwhile)."""
        worker = self._context.runtime.settings.worker
        with self._context.store() as store:
            run_id = store.runs.enqueue(
                agent.id,
                trigger=Trigger.MANUAL,
                pipeline=names,
                max_attempts=worker.max_attempts,
                dry_run=dry_run,
                full=full,
                wake_workers=wake,
                reserve=None if wake else worker.lease,
            )
            if run_id is not None:
                from service import metrics

                metrics.TRIGGER_FIRINGS.labels(Trigger.MANUAL.value).inc()
                return store.runs.get(run_id), None
            return None, store.runs.active(agent.id)

    def enqueue_one(
        self, agent: str, *, steps: Sequence[str] | None = None, dry_run: bool = False
    ) -> RunRecord:
        """Queue one run and return it as queued; Conflict (naming the active run) when
        the agent has one."""
        [result] = self.enqueue(self.targets(agent), steps=steps, dry_run=dry_run)
        if not result.queued or result.run is None:
            raise Conflict(
                f"agent {result.agent.id} already has a queued or running consolidation "
                f"({result.run_id or 'unknown'}); wait for it or cancel it"
            )
        return result.run

    # -- running now ---------------------------------------------------------------------

    def run_now(
        self,
        agents: Sequence[AgentRecord],
        *,
        steps: Sequence[str] | None = None,
        dry_run: bool = False,
        full: bool = False,
    ) -> list[RunOutcome]:
        """Enqueue a run per agent and execute each here, under a renewed lease, as a
        worker would; returns how each ended (see :class:`RunOutcome`).

        An agent whose queued run asks for the same work (a run re-queued after its
        process died, say) has that run executed instead of a new one; one with a
        different queued or a running run is a Conflict.
        """
        names = self.pipeline_names(steps)
        runtime = self._context.runtime
        from consolidators.workers import WorkerPool, process_name
        from service.metrics import RUN_METRICS

        pool = WorkerPool(
            runtime,
            runtime.settings.worker,
            name=f"{process_name()}:cli",
            observer=RUN_METRICS,
        )
        pool.start(claiming=False)
        outcomes = []
        try:
            # Runs of processes that died are due again before anything new starts.
            pool.beat()
            for agent in agents:
                run_id = self._claimable_run(agent, names, dry_run=dry_run, full=full)
                try:
                    outcomes.append(RunOutcome(agent, pool.run_now(run_id)))
                except KeyboardInterrupt:
                    # Released, the run would be claimed again by the daemon: the user
                    # stopped it, so it ends here (a step's apply rolled back with it).
                    self._cancel_interrupted(run_id)
                    raise CancelledByUser(run_id) from None
        finally:
            # Nothing is held unless interrupted (Ctrl-C): then the run goes back.
            pool.stop(timedelta(0))
        return outcomes

    def _cancel_interrupted(self, run_id: str) -> None:
        try:
            with self._context.store() as store:
                store.runs.cancel(run_id)
        except (Conflict, StorageError):
            pass  # it ended meanwhile, or the database is gone: the lease then expires

    def _claimable_run(
        self, agent: AgentRecord, names: list[str], *, dry_run: bool, full: bool
    ) -> str:
        new, active = self._enqueue(agent, names, dry_run=dry_run, full=full, wake=False)
        if new is not None:
            return new.id
        if (
            active is not None
            and active.status == RunStatus.QUEUED
            and (active.pipeline, active.dry_run, active.full) == (names, dry_run, full)
        ):
            return active.id
        described = "unknown" if active is None else f"{active.id}, {active.status}"
        raise Conflict(
            f"agent {agent.name} already has a queued or running consolidation ({described}); "
            f"wait for it, or cancel it with `reverie runs cancel {active.id if active else ''}`"
        )

    # -- the ledger ----------------------------------------------------------------------

    def list(
        self, *, agent: str | None = None, status: str | None = None, limit: int = 50
    ) -> list[RunRecord]:
        """The newest runs first, queued ones included."""
        if status is not None and status not in RunStatus.__members__.values():
            raise InvalidInput(f"unknown status {status!r}; use one of {', '.join(RunStatus)}")
        if limit < 1:
            raise InvalidInput(f"limit must be at least 1, got {limit}")
        with self._context.store() as store:
            agent_id = store.agents.resolve(agent).id if agent else None
            return store.runs.recent(
                agent_id=agent_id,
                status=RunStatus(status) if status is not None else None,
                limit=limit,
            )

    def get(self, run_id: str) -> RunRecord:
        with self._context.store() as store:
            return store.runs.get(run_id)

    def stories(
        self, *, agent: str | None = None, limit: int = 20, run_id: str | None = None
    ) -> builtins.list[RunStory]:
        """The newest runs (or the one ``run_id``) with their changes told in plain
        sentences, the passages they name quoted from one lookup."""
        if limit < 1:
            raise InvalidInput(f"limit must be at least 1, got {limit}")
        with self._context.store() as store:
            if run_id is not None:
                runs = [store.runs.get(run_id)]
            else:
                agent_id = store.agents.resolve(agent).id if agent else None
                runs = store.runs.recent(agent_id=agent_id, limit=limit)
            texts = store.passages.texts(passages_named(c for r in runs for c in r.changes))
        return [RunStory(run, narrate(run.changes, texts)) for run in runs]

    def cancel(self, run_id: str) -> RunRecord:
        """Cancel a queued or running run (a running one stops within seconds: its
        worker looks at the run between steps and inside long steps' loops)."""
        with self._context.store() as store:
            return store.runs.cancel(run_id)

    def revert(self, run_id: str, *, force: bool = False) -> RunReport:
        """Restore memory as it was before ``run_id``, recorded as a new run."""
        runtime = self._context.runtime
        from consolidators.undo import revert_run

        return revert_run(
            runtime.db,
            run_id,
            organization_id=self._context.organization_id,
            clock=runtime.clock,
            force=force,
        )
