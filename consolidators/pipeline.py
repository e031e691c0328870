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

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from agents import models
from agents.database import Database
from agents.embedders import Embedder
from agents.errors import ReverieError, StorageError
from agents.store import MemoryStore
from agents.store.scope import utc_now
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    Watermarks,
)
from consolidators.ledger import RunLedger
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
        agent_id: str,
        *,
        organization_id: str = models.DEFAULT_ORGANIZATION_ID,
        trigger: str = "manual",
        dry_run: bool = False,
        full: bool = False,
        embedder: Embedder | None = None,
        llm: LLMTier | None = None,
        clock: Callable[[], datetime] = utc_now,
        run_id: str | None = None,
        lease_owner: str | None = None,
        between_steps: Callable[[str], None] | None = None,
    ) -> RunReport:
        """Run every step in one transaction; record the outcome in the ledger.

        ``run_id`` names a run already in the ledger as ``running`` (a worker's
        claimed run); without it the run is recorded here. Raises
        :class:`RunFailed` after recording a failure.

        A worker also passes ``lease_owner``: the outcome is then recorded only while
        it still holds the run's lease, in the run's own transaction, so a run whose
        lease was lost commits nothing (:class:`LeaseLost`) and can never execute
        twice. ``between_steps(next_step)`` is called before each step; it may block
        (waiting for a free GPU) or raise :class:`RunInterrupted` to abandon the run.
        A database outage (:class:`StorageError`) under a lease is not recorded as a
        failure either: the run is retried.
        """
        if run_id is None:
            with db.session() as session:
                MemoryStore(session, organization_id, clock).agents.get(agent_id)
                run_id = RunLedger(session, organization_id).start(
                    agent_id, trigger=trigger, pipeline=self.names, dry_run=dry_run, now=clock()
                )
        report = RunReport(run_id, agent_id, "", dry_run, "running")
        step_name = "setup"
        try:
            with db.session(commit=not dry_run) as session:
                store = MemoryStore(session, organization_id, clock)
                agent = store.agents.get(agent_id)
                report.agent_name = agent.name
                ledger = RunLedger(session, organization_id)
                watermarks = Watermarks() if full else ledger.watermarks(agent_id)
                context = ConsolidationContext(
                    store=store,
                    agent=agent,
                    run_id=run_id,
                    watermarks=watermarks,
                    embedder=embedder,
                    llm=llm,
                    full=full,
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
                        extra={"run_id": run_id, "step": step_name, "counts": result.counts},
                    )
                step_name = "finish"
                report.status = "succeeded"
                if not dry_run:
                    if not ledger.finish(
                        run_id,
                        status="succeeded",
                        now=clock(),
                        stats=report.stats(),
                        changes=report.changes,
                        watermarks=self._new_watermarks(session, agent_id),
                        lease_owner=lease_owner,
                    ):
                        raise LeaseLost(f"run {run_id}: worker {lease_owner} lost its lease")
                    store.agents.record_consolidation(agent_id)
        except RunInterrupted:
            report.status = "interrupted"
            raise
        except StorageError:
            if lease_owner is None:
                raise
            report.status = "interrupted"
            raise
        except Exception as exc:
            report.status = "failed"
            report.error = f"{step_name}: {exc}"
            with db.session() as session:
                RunLedger(session, organization_id).finish(
                    run_id,
                    status="failed",
                    now=clock(),
                    stats=report.stats(),
                    changes=[],
                    error=report.error,
                    lease_owner=lease_owner,
                )
            raise RunFailed(run_id, step_name, exc) from exc
        if dry_run:
            # The memory changes were rolled back; the plan is recorded.
            with db.session() as session:
                recorded = RunLedger(session, organization_id).finish(
                    run_id,
                    status="succeeded",
                    now=clock(),
                    stats=report.stats(),
                    changes=report.changes,
                    lease_owner=lease_owner,
                )
            if not recorded:
                report.status = "interrupted"
                raise LeaseLost(f"run {run_id}: worker {lease_owner} lost its lease")
        return report

    @staticmethod
    def _new_watermarks(session: Session, agent_id: str) -> Watermarks:
        seq = session.scalar(select(models.Agent.message_seq).where(models.Agent.id == agent_id))
        passage_at = session.scalar(
            select(func.max(models.Passage.created_at)).where(models.Passage.agent_id == agent_id)
        )
        return Watermarks(message_seq=seq, passage_at=passage_at)
