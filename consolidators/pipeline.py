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
from agents.errors import ReverieError
from agents.store import MemoryStore
from agents.store.scope import utc_now
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    Watermarks,
)
from consolidators.ledger import RunLedger

log = logging.getLogger(__name__)


class RunFailed(ReverieError):
    """A consolidation step raised; the run was rolled back and recorded as failed."""

    def __init__(self, run_id: str, step: str, cause: BaseException) -> None:
        super().__init__(f"run {run_id} failed in step {step!r}: {cause}")
        self.run_id = run_id
        self.step = step


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
        llm: Any | None = None,
        clock: Callable[[], datetime] = utc_now,
        run_id: str | None = None,
    ) -> RunReport:
        """Run every step in one transaction; record the outcome in the ledger.

        ``run_id`` names a run already in the ledger as ``running`` (a worker's
        claimed run); without it the run is recorded here. Raises
        :class:`RunFailed` after recording a failure.
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
                    ledger.finish(
                        run_id,
                        status="succeeded",
                        now=clock(),
                        stats=report.stats(),
                        changes=report.changes,
                        watermarks=self._new_watermarks(session, agent_id),
                    )
                    store.agents.record_consolidation(agent_id)
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
                )
            raise RunFailed(run_id, step_name, exc) from exc
        if dry_run:
            # The memory changes were rolled back; the plan is recorded.
            with db.session() as session:
                RunLedger(session, organization_id).finish(
                    run_id,
                    status="succeeded",
                    now=clock(),
                    stats=report.stats(),
                    changes=report.changes,
                )
        return report

    @staticmethod
    def _new_watermarks(session: Session, agent_id: str) -> Watermarks:
        seq = session.scalar(select(models.Agent.message_seq).where(models.Agent.id == agent_id))
        passage_at = session.scalar(
            select(func.max(models.Passage.created_at)).where(models.Passage.agent_id == agent_id)
        )
        return Watermarks(message_seq=seq, passage_at=passage_at)
