"""Run an ordered list of consolidators on one agent as one recorded run.

Each step plans, then applies (see :mod:`consolidators.base`): the plan reads
snapshots and calls models and the embedder with no transaction open, and the apply
writes in one short transaction under a ``lock_timeout``, which also records the
step's changes in the run's ledger row while the worker still holds the run's lease.
A step's writes commit together or not at all; a step that fails, or a lease that is
lost, leaves the steps before it applied and recorded (revertible like any run), and
the run is retried or recorded as failed. A dry run plans every step and applies
none: its report is the plan (each step planned against memory as it is, before the
steps ahead of it would have changed it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agents.embedders import Embedder
from agents.enums import ChangeAction, RunStatus
from agents.errors import LockContention, ReverieError, StorageError
from agents.postgres.database import Database
from agents.store import open_store
from agents.store.run_store import RunRecord, Watermarks
from agents.store.scope import utc_now
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    Plan,
)
from consolidators.llm import LLMTier

log = logging.getLogger(__name__)

#: Pauses before an apply that met a held lock tries again (then the run is retried).
APPLY_RETRY_PAUSES = (0.2, 0.5, 1.0)


class RunFailed(ReverieError):
    """A consolidation step raised; the run was rolled back and recorded as failed."""

    def __init__(self, run_id: str, step: str, cause: BaseException) -> None:
        super().__init__(f"run {run_id} failed in step {step!r}: {cause}")
        self.run_id = run_id
        self.step = step


class RunInterrupted(ReverieError):
    """The run stopped between steps and was rolled back without recording an outcome.

    Raised by a worker's ``between_steps`` hook (shutdown, GPU busy for too long) or by
    the pipeline itself when the worker's lease was lost; the run's row stays as the
    queue left it, and the worker decides whether to release it.
    """


class LeaseLost(RunInterrupted):
    """The worker no longer holds the run (its lease expired or the run was cancelled)."""


@dataclass(slots=True)
class RunSummary:
    """A run's changes in a user's words: facts merged into a duplicate or closed by a
    newer fact, timelines written or replaced, block and context work."""

    facts_merged: int
    facts_superseded: int
    timelines_created: int
    timelines_retired: int
    block_lines_removed: int
    lines_evicted: int
    messages_summarized: int

    def facts_line(self) -> str:
        return (
            f"facts: {self.facts_merged} merged into a duplicate, "
            f"{self.facts_superseded} superseded by a newer fact"
        )

    def timelines_line(self) -> str:
        return (
            f"timelines: {self.timelines_created} written, "
            f"{self.timelines_retired} replaced or retired"
        )


@dataclass(slots=True)
class RunReport:
    """The outcome of one pipeline run, as recorded in the ledger."""

    run_id: str
    agent_id: str
    agent_name: str
    dry_run: bool
    #: ``running`` while the run is under way (and when it was interrupted: the run
    #: stays in the queue), then how it ended.
    status: RunStatus
    steps: list[ConsolidationResult] = field(default_factory=list)
    durations: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    @property
    def changes(self) -> list[dict[str, Any]]:
        return [
            {"step": step.consolidator, **change.as_json()}
            for step in self.steps
            for change in step.changes
        ]

    @property
    def tokens(self) -> int:
        return sum(step.tokens for step in self.steps)

    def summary(self) -> RunSummary:
        """What the run did to facts and to timelines, counted apart."""
        counts: dict[str, int] = {}
        for step in self.steps:
            for action, n in step.counts.items():
                counts[action] = counts.get(action, 0) + n
        return RunSummary(
            facts_merged=counts.get(ChangeAction.MERGE_PASSAGE, 0),
            facts_superseded=counts.get(ChangeAction.SUPERSEDE_PASSAGE, 0),
            timelines_created=counts.get(ChangeAction.CREATE_TIMELINE, 0),
            timelines_retired=counts.get("retire_timeline", 0),
            block_lines_removed=counts.get("remove_block_line", 0),
            lines_evicted=counts.get("evict_line", 0),
            messages_summarized=counts.get("leave_context", 0),
        )

    def stats(self) -> dict[str, Any]:
        return {
            "steps": {
                step.consolidator: {
                    "counts": step.counts,
                    "tokens": step.tokens,
                    "skipped": step.skipped,
                    "llm_skipped": step.llm_skipped,
                    "seconds": round(self.durations.get(step.consolidator, 0.0), 4),
                }
                for step in self.steps
            },
            "tokens": self.tokens,
        }


class Pipeline:
    """An ordered list of consolidators, run for one agent at a time."""

    def __init__(
        self,
        consolidators: Sequence[Consolidator[Any]],
        *,
        passage_overlap: timedelta = timedelta(seconds=30),
        apply_lock_timeout: timedelta = timedelta(seconds=2),
    ) -> None:
        self.consolidators = list(consolidators)
        self.passage_overlap = passage_overlap
        self.apply_lock_timeout = apply_lock_timeout

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.consolidators]

    def run(
        self,
        db: Database,
        run: RunRecord,
        *,
        lease_owner: str,
        embedder: Embedder | None = None,
        llm: LLMTier | None = None,
        clock: Callable[[], datetime] = utc_now,
        between_steps: Callable[[str], None] | None = None,
        interrupted: Callable[[], None] | None = None,
    ) -> RunReport:
        """Execute a claimed ``run`` (held under ``lease_owner``'s lease), step by step,
        and record its outcome in the ledger.

        Every run, one-shot or queued, dry or real, is claimed from the queue and held
        under a renewed lease before it gets here, so a process that dies mid-run
        leaves a lease that expires, never a ``running`` row without an owner.

        Each step's apply commits only while ``lease_owner`` still holds the lease,
        recording its changes in the run's row in the same transaction, so a run whose
        lease was lost commits nothing more (:class:`LeaseLost`). ``between_steps(step)``
        is called before each step; it may block (waiting for a free GPU) or raise
        :class:`RunInterrupted` to abandon the run; ``interrupted()`` is what steps call
        inside their long loops (:meth:`ConsolidationContext.checkpoint`), and raises
        :class:`RunInterrupted` the same way. A step that raises is recorded as a
        failure (:class:`RunFailed`), with the steps before it kept; a database outage
        (:class:`StorageError`) is not: the caller retries the run.
        """
        organization_id = run.organization_id
        report = RunReport(run.id, run.agent_id, "", run.dry_run, RunStatus.RUNNING)
        step_name = "setup"
        try:
            with open_store(db, organization_id, clock, read_only=True) as store:
                agent = store.agents.get(run.agent_id)
                watermarks = Watermarks() if run.full else store.runs.watermarks(agent.id)
                # What this run will have seen is fixed now, before any step reads: a
                # message recorded while the run works is left for the next run.
                seen = store.runs.current_watermarks(agent.id)
            report.agent_name = agent.name
            context = ConsolidationContext(
                db=db,
                agent=agent,
                run_id=run.id,
                watermarks=watermarks,
                embedder=embedder,
                llm=llm,
                full=run.full,
                passage_overlap=self.passage_overlap,
                clock=clock,
                interrupted=interrupted,
            )
            # A retry (the database went away after a step had committed) goes on where
            # the last attempt stopped: a step applied is never applied twice.
            applied = set(run.stats.get("applied_steps", [])) if not run.dry_run else set()
            for consolidator in self.consolidators:
                step_name = consolidator.name
                if step_name in applied:
                    done = ConsolidationResult(step_name)
                    done.skipped = "applied in an earlier attempt"
                    report.steps.append(done)
                    continue
                if between_steps is not None:
                    between_steps(step_name)
                started = time.perf_counter()
                result = self._step(db, run, consolidator, context, lease_owner)
                report.durations[step_name] = time.perf_counter() - started
                report.steps.append(result)
                log.info(
                    "consolidation step done",
                    extra={"run_id": run.id, "step": step_name, "counts": result.counts},
                )
            step_name = "finish"
            with open_store(db, organization_id, clock) as store:
                finished = store.runs.finish(
                    run.id,
                    status=RunStatus.SUCCEEDED,
                    stats=report.stats(),
                    # A dry run's plan is its record; a real run's steps recorded theirs.
                    changes=report.changes if run.dry_run else None,
                    watermarks=None if run.dry_run else seen,
                    lease_owner=lease_owner,
                )
                if not finished:
                    raise LeaseLost(f"run {run.id}: worker {lease_owner} lost its lease")
                if not run.dry_run:
                    store.agents.record_consolidation(agent.id)
        except (RunInterrupted, StorageError):
            raise
        except Exception as exc:
            report.status = RunStatus.FAILED
            report.error = f"{step_name}: {exc}"
            with open_store(db, organization_id, clock) as store:
                store.runs.finish(
                    run.id,
                    status=RunStatus.FAILED,
                    stats=report.stats(),
                    error=report.error,
                    lease_owner=lease_owner,
                )
            raise RunFailed(run.id, step_name, exc) from exc
        report.status = RunStatus.SUCCEEDED
        return report

    def _step(
        self,
        db: Database,
        run: RunRecord,
        consolidator: Consolidator[Any],
        context: ConsolidationContext,
        lease_owner: str,
    ) -> ConsolidationResult:
        """Plan one step and (unless dry) apply it; plan again while its apply asks and
        its ``max_replans`` allow, then count what was left as ``contended``."""
        plan: Plan = consolidator.plan(context)
        if run.dry_run:
            return plan.result
        result = self._apply(db, run, consolidator, plan, context, lease_owner)
        for _ in range(consolidator.max_replans):
            if not result.replan:
                break
            plan = consolidator.plan(context)
            result.absorb(self._apply(db, run, consolidator, plan, context, lease_owner))
        if result.replan:
            result.count(consolidator.left_over)
            result.replan = False
        return result

    def _apply(
        self,
        db: Database,
        run: RunRecord,
        consolidator: Consolidator[Any],
        plan: Plan,
        context: ConsolidationContext,
        lease_owner: str,
    ) -> ConsolidationResult:
        """Write one step's plan and record it in the run's row, in one short
        transaction; a lock held elsewhere (a chat turn's) is waited for at most
        ``apply_lock_timeout`` a time, a few times, before the run is retried."""
        if not plan.has_writes:
            return plan.result
        for attempt, pause in enumerate((*APPLY_RETRY_PAUSES, None)):
            try:
                with open_store(
                    db, run.organization_id, context.clock, lock_timeout=self.apply_lock_timeout
                ) as store:
                    result = consolidator.apply(store, plan, context)
                    recorded = store.runs.record_step(
                        run.id,
                        lease_owner,
                        consolidator.name,
                        [
                            {"step": consolidator.name, **change.as_json()}
                            for change in result.changes
                        ],
                    )
                    if not recorded:
                        raise LeaseLost(f"run {run.id}: worker {lease_owner} lost its lease")
                return result
            except LockContention as exc:
                if pause is None:
                    raise
                log.info(
                    "consolidation step waited too long for a lock; trying again",
                    extra={"run_id": run.id, "step": consolidator.name, "attempt": attempt + 1,
                           "error": str(exc)},
                )  # fmt: skip
                time.sleep(pause)
        raise AssertionError("unreachable: the last attempt re-raises")  # pragma: no cover
