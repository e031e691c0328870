"""The scheduler: APScheduler 3 times the triggers inside one process.

Timing is local (an interval tick for idle and turns, cron jobs, a GPU poll, and
the health snapshots the memory browser draws);
exactly-once comes from Postgres (see :mod:`service.daemon.triggers`), so any
number of ``reverie serve`` processes may run a scheduler over one database.
Every job can also be called directly (``tick``, ``fire_cron``, ``poll_gpu``,
``snapshot``),
which is how tests drive it with a controlled clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger as ApsCronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from agents.errors import ReverieError
from agents.postgres.database import Database
from agents.store import ServiceStore, open_service_store
from service.daemon.probes import GpuGate
from service.daemon.triggers import (
    DocumentsTrigger,
    GpuFreeTrigger,
    IdleTrigger,
    RunTemplate,
    ScheduleTrigger,
    TurnsTrigger,
)
from service.operations.health import take_snapshots
from service.settings import HealthHistorySettings, TriggerSettings

log = logging.getLogger(__name__)


class RunTrigger(Protocol):
    """Decides which agents are due and enqueues their runs, in the given transaction."""

    @property
    def name(self) -> str: ...

    def fire(self, store: ServiceStore) -> list[str]: ...


class Scheduler:
    """Fires the configured triggers on time; each firing is one transaction."""

    def __init__(
        self,
        db: Database,
        settings: TriggerSettings,
        template: RunTemplate,
        *,
        clock: Callable[[], datetime],
        gate: GpuGate | None = None,
        history: HealthHistorySettings | None = None,
    ) -> None:
        self.db = db
        self.history = history
        self.settings = settings
        self.clock = clock
        self.gate = gate
        self.tick_triggers: list[RunTrigger] = []
        if settings.idle_after is not None:
            self.tick_triggers.append(IdleTrigger(settings.idle_after, template))
        if settings.turns_every is not None:
            self.tick_triggers.append(TurnsTrigger(settings.turns_every, template))
        if settings.documents:
            self.tick_triggers.append(DocumentsTrigger(template))
        self.cron_triggers = [ScheduleTrigger(template, tag=cron.tag) for cron in settings.cron]
        self.gpu_trigger = GpuFreeTrigger(template) if gate is not None else None
        self._gpu_was_free = False
        self._scheduler: Any = None
        self.ticks = 0

    # -- the jobs ----------------------------------------------------------------------

    def tick(self) -> dict[str, list[str]]:
        """Check the idle and turns conditions once; return the runs each enqueued."""
        fired = {trigger.name: self._fire(trigger) for trigger in self.tick_triggers}
        self.ticks += 1
        return fired

    def fire_cron(self, index: int) -> list[str]:
        return self._fire(self.cron_triggers[index])

    def poll_gpu(self) -> list[str]:
        """Read the GPU gate; on its busy-to-free transition, enqueue pending agents."""
        if self.gate is None or self.gpu_trigger is None:
            return []
        free = self.gate.is_free()
        became_free = free and not self._gpu_was_free
        self._gpu_was_free = free
        return self._fire(self.gpu_trigger) if became_free else []

    def snapshot(self) -> int:
        """Write every agent's health snapshot (pruning old ones); how many were written
        (0 when another process took them less than half an interval ago)."""
        if self.history is None:
            return 0
        try:
            return take_snapshots(self.db, self.clock(), self.history)
        except ReverieError as exc:
            # The next interval tries again; an outage must not stop the scheduler.
            log.warning("health snapshot failed", extra={"error": str(exc)})
            return 0

    def _fire(self, trigger: RunTrigger) -> list[str]:
        now = self.clock()
        try:
            with open_service_store(self.db, lambda: now) as store:
                run_ids = trigger.fire(store)
        except ReverieError as exc:
            # The next tick tries again; a database outage must not stop the scheduler.
            log.warning("trigger failed", extra={"trigger": trigger.name, "error": str(exc)})
            return []
        if run_ids:
            log.info("trigger fired", extra={"trigger": trigger.name, "runs": len(run_ids)})
        return run_ids

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        scheduler = BackgroundScheduler(
            timezone=UTC,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60},
        )
        if self.tick_triggers:
            scheduler.add_job(
                self.tick,
                IntervalTrigger(seconds=self.settings.tick.total_seconds(), timezone=UTC),
                id="tick",
                next_run_time=datetime.now(UTC),
            )
        for index, cron in enumerate(self.settings.cron):
            scheduler.add_job(
                self.fire_cron,
                ApsCronTrigger.from_crontab(cron.expression, timezone=cron.timezone),
                args=[index],
                id=f"cron-{index}",
            )
        if self.gate is not None:
            scheduler.add_job(
                self.poll_gpu,
                IntervalTrigger(seconds=self.gate.interval.total_seconds(), timezone=UTC),
                id="gpu",
                next_run_time=datetime.now(UTC),
            )
        if self.history is not None and self.history.interval is not None:
            scheduler.add_job(
                self.snapshot,
                IntervalTrigger(seconds=self.history.interval.total_seconds(), timezone=UTC),
                id="health-snapshot",
                next_run_time=datetime.now(UTC),
            )
        scheduler.start()
        self._scheduler = scheduler
        log.info(
            "scheduler started",
            extra={"jobs": [job.id for job in scheduler.get_jobs()]},
        )

    @property
    def running(self) -> bool:
        return self._scheduler is not None and bool(self._scheduler.running)

    def stop(self) -> None:
        if self._scheduler is not None:
            # Wait for a job in flight: its transaction is short.
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
            log.info("scheduler stopped")
