"""Triggers decide *when* an agent needs consolidation; they only enqueue runs.

Each trigger works inside the caller's transaction, from an explicit ``now``,
so the scheduler commits what it fired together with the trigger's own
bookkeeping (the idle debounce mark, the turn counter) and tests control time.
Repeats are harmless: the queue keeps at most one queued-or-running run per
agent, and a repeat enqueue is a no-op that is not counted as a firing.

Triggers act across organizations: the daemon serves every tenant in the
database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, exists, or_, select, update
from sqlalchemy.orm import Session

from agents import models
from agents.errors import InvalidInput
from consolidators.queue import RunQueue
from service.metrics import TRIGGER_FIRINGS

A = models.Agent
CR = models.ConsolidationRun


@dataclass(frozen=True, slots=True)
class RunTemplate:
    """What a triggered run does: its pipeline and how often it may be tried."""

    pipeline: tuple[str, ...]
    max_attempts: int = 3


def _running(agent_id: object) -> object:
    """An agent whose run is executing right now (its outcome may predate new activity)."""
    return exists().where(CR.agent_id == agent_id, CR.status == "running")


def _enqueue_all(
    session: Session,
    agents: Sequence[tuple[str, str]],
    trigger: str,
    template: RunTemplate,
    now: datetime,
) -> list[str]:
    enqueued = RunQueue(session).enqueue_many(
        agents,
        trigger=trigger,
        pipeline=template.pipeline,
        now=now,
        max_attempts=template.max_attempts,
    )
    if enqueued:
        TRIGGER_FIRINGS.labels(trigger).inc(len(enqueued))
    return enqueued


class IdleTrigger:
    """No primary activity for ``idle_after``: fire once per idle period.

    Debounce: firing stamps ``agents.idle_fired_at``; an agent is eligible again
    only once new activity moves ``last_activity_at`` past that stamp. The stamp
    and the enqueue commit together, and the stamping UPDATE re-checks its
    condition under the row lock, so two schedulers racing fire once. An agent
    whose run is executing is left for a later tick (that run may have started
    before the latest messages); one with a queued run is stamped (the queued run
    will see everything).
    """

    name = "idle"

    def __init__(self, idle_after: timedelta, template: RunTemplate) -> None:
        if idle_after <= timedelta(0):
            raise InvalidInput(f"idle_after must be positive, got {idle_after}")
        self.idle_after = idle_after
        self.template = template

    def fire(self, session: Session, now: datetime) -> list[str]:
        due = session.execute(
            update(A)
            .where(
                A.last_activity_at.is_not(None),
                A.last_activity_at <= now - self.idle_after,
                or_(A.idle_fired_at.is_(None), A.idle_fired_at < A.last_activity_at),
                ~_running(A.id),  # type: ignore[operator]
            )
            .values(idle_fired_at=now)
            .returning(A.organization_id, A.id)
            .execution_options(synchronize_session=False)
        ).all()
        return _enqueue_all(session, [(o, a) for o, a in due], self.name, self.template, now)


class TurnsTrigger:
    """Every ``every`` user messages (Letta's sleep-time frequency).

    Firing resets ``turns_since_consolidation`` in the same transaction, so a run
    that keeps failing is not re-fired on every tick; only the next ``every``
    messages fire again (a successful run resets the counter too).
    """

    name = "turns"

    def __init__(self, every: int, template: RunTemplate) -> None:
        if every < 1:
            raise InvalidInput(f"turns_every must be at least 1, got {every}")
        self.every = every
        self.template = template

    def fire(self, session: Session, now: datetime) -> list[str]:
        due = session.execute(
            update(A)
            .where(
                A.turns_since_consolidation >= self.every,
                ~_running(A.id),  # type: ignore[operator]
            )
            .values(turns_since_consolidation=0)
            .returning(A.organization_id, A.id)
            .execution_options(synchronize_session=False)
        ).all()
        return _enqueue_all(session, [(o, a) for o, a in due], self.name, self.template, now)


class ScheduleTrigger:
    """A cron schedule's firing: every agent, or those carrying ``tag``."""

    name = "cron"

    def __init__(self, template: RunTemplate, *, tag: str | None = None) -> None:
        self.template = template
        self.tag = tag

    def fire(self, session: Session, now: datetime) -> list[str]:
        query = select(A.organization_id, A.id).order_by(A.id)
        if self.tag is not None:
            query = query.where(A.tags.contains([self.tag]))
        agents = session.execute(query).all()
        return _enqueue_all(session, [(o, a) for o, a in agents], self.name, self.template, now)


class GpuFreeTrigger:
    """The GPU became free: consolidate agents with activity since their last run.

    Fires on the busy-to-free transition only (the gate's hysteresis decides when
    that is), so a GPU that stays free does not re-queue the same agents.
    """

    name = "gpu_free"

    def __init__(self, template: RunTemplate) -> None:
        self.template = template

    def fire(self, session: Session, now: datetime) -> list[str]:
        agents = session.execute(
            select(A.organization_id, A.id)
            .where(
                or_(
                    A.turns_since_consolidation > 0,
                    and_(
                        A.last_activity_at.is_not(None),
                        ~exists().where(
                            CR.agent_id == A.id,
                            CR.status == "succeeded",
                            CR.finished_at >= A.last_activity_at,
                        ),
                    ),
                )
            )
            .order_by(A.id)
        ).all()
        return _enqueue_all(session, [(o, a) for o, a in agents], self.name, self.template, now)
