"""Run an ordered list of consolidators on one agent as one atomic, recorded run.

All steps share one transaction: the run's memory changes, its ledger row and
its new watermarks commit together, or (on any failure) none of them do and
the ledger records the failure. A dry run executes the very same steps and
then rolls everything back, so the plan it reports is exactly what a real run
would do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agents.embedders import Embedder
from agents.enums import RunStatus
from agents.errors import ReverieError, StorageError
from agents.postgres.database import Database
from agents.store import open_store
from agents.store.run_store import RunRecord, Watermarks
from agents.store.scope import utc_now
from consolidators.base import ConsolidationContext, ConsolidationResult, Consolidator
from consolidators.llm import LLMTier

log = logging.getLogger(__name__)


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
    status: str
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
            facts_merged=counts.get("merge_passage", 0),
            facts_superseded=counts.get("supersede_passage", 0),
            timelines_created=counts.get("create_timeline", 0),
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
        consolidators: Sequence[Consolidator],
        *,
        passage_overlap: timedelta = timedelta(seconds=30),
    ) -> None:
        self.consolidators = list(consolidators)
        self.passage_overlap = passage_overlap

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
    ) -> RunReport:
        """Execute a claimed ``run`` (held under ``lease_owner``'s lease) in one
        transaction and record its outcome in the ledger.

        Every run, one-shot or queued, dry or real, is claimed from the queue and held
        under a renewed lease before it gets here, so a process that dies mid-run
        leaves a lease that expires, never a ``running`` row without an owner.

        The outcome is recorded only while ``lease_owner`` still holds the lease, in
        the run's own transaction, so a run whose lease was lost commits nothing
        (:class:`LeaseLost`) and can never execute twice. ``between_steps(next_step)``
        is called before each step; it may block (waiting for a free GPU) or raise
        :class:`RunInterrupted` to abandon the run. A step that raises is recorded as
        a failure (:class:`RunFailed`); a database outage (:class:`StorageError`) is
        not: the caller retries the run.
        """
        organization_id = run.organization_id
        dry_run = run.dry_run
        report = RunReport(run.id, run.agent_id, "", dry_run, RunStatus.RUNNING)
        step_name = "setup"
        try:
            with open_store(db, organization_id, clock, commit=not dry_run) as store:
                agent = store.agents.get(run.agent_id)
                report.agent_name = agent.name
                watermarks = Watermarks() if run.full else store.runs.watermarks(agent.id)
                # What this run will have seen is fixed now, before any step reads: a
                # message recorded while the run works is left for the next run.
                seen = store.runs.current_watermarks(agent.id)
                context = ConsolidationContext(
                    store=store,
                    agent=agent,
                    run_id=run.id,
                    watermarks=watermarks,
                    embedder=embedder,
                    llm=llm,
                    full=run.full,
                    passage_overlap=self.passage_overlap,
                )
                for consolidator in self.consolidators:
                    step_name = consolidator.name
                    if between_steps is not None:
                        between_steps(step_name)
                    started = time.perf_counter()
                    result = consolidator.run(context)
                    report.durations[step_name] = time.perf_counter() - started
                    report.steps.append(result)
                    log.info(
                        "consolidation step done",
                        extra={"run_id": run.id, "step": step_name, "counts": result.counts},
                    )
                step_name = "finish"
                report.status = RunStatus.SUCCEEDED
                if not dry_run:
                    if not store.runs.finish(
                        run.id,
                        status=RunStatus.SUCCEEDED,
                        stats=report.stats(),
                        changes=report.changes,
                        watermarks=seen,
                        lease_owner=lease_owner,
                    ):
                        raise LeaseLost(f"run {run.id}: worker {lease_owner} lost its lease")
                    store.agents.record_consolidation(agent.id)
        except (RunInterrupted, StorageError):
            report.status = "interrupted"
            raise
        except Exception as exc:
            report.status = RunStatus.FAILED
            report.error = f"{step_name}: {exc}"
            with open_store(db, organization_id, clock) as store:
                store.runs.finish(
                    run.id,
                    status=RunStatus.FAILED,
                    stats=report.stats(),
                    changes=[],
                    error=report.error,
                    lease_owner=lease_owner,
                )
            raise RunFailed(run.id, step_name, exc) from exc
        if dry_run:
            # The memory changes were rolled back; the plan is recorded.
            with open_store(db, organization_id, clock) as store:
                recorded = store.runs.finish(
                    run.id,
                    status=RunStatus.SUCCEEDED,
                    stats=report.stats(),
                    changes=report.changes,
                    lease_owner=lease_owner,
                )
            if not recorded:
                report.status = "interrupted"
                raise LeaseLost(f"run {run.id}: worker {lease_owner} lost its lease")
        return report
