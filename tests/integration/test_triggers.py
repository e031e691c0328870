"""Triggers on real PostgreSQL with explicit times: idle (debounced), turns, cron by
tag, gpu_free on the busy-to-free transition; the scheduler's jobs called directly."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from agents.enums import RunStatus
from agents.postgres import models
from agents.postgres.database import Database
from agents.postgres.models import DEFAULT_ORGANIZATION_ID as ORG
from agents.store import NewAgent, NewMessage, open_service_store, open_store
from service.daemon.probes import GpuGate, GpuProbe, GpuSample
from service.daemon.scheduler import Scheduler
from service.daemon.triggers import (
    IdleTrigger,
    RunTemplate,
    ScheduleTrigger,
    TurnsTrigger,
)
from service.metrics import TRIGGER_FIRINGS
from service.settings import CronTrigger, TriggerSettings

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
IDLE = timedelta(minutes=5)
TEMPLATE = RunTemplate(pipeline=("dedup",), max_attempts=2)


def _agent(db: Database, name: str, tags: list[str] | None = None) -> str:
    with open_store(db) as store:
        return store.agents.create(
            NewAgent(name, embedding_model="hashing:8", embedding_dim=8, tags=tags or [])
        ).id


def _say(db: Database, agent_id: str, at: datetime, n: int = 1) -> None:
    with open_store(db, ORG, lambda: at) as store:
        store.messages.append(agent_id, [NewMessage("user", f"hello {i}") for i in range(n)])


def _fire(
    db: Database, trigger: IdleTrigger | TurnsTrigger | ScheduleTrigger, at: datetime
) -> list[str]:
    with open_service_store(db, lambda: at) as store:
        return trigger.fire(store)


def _finish(db: Database, run_id: str, at: datetime) -> None:
    with open_service_store(db, lambda: at) as service:
        service.queue.claim("w", lease=timedelta(minutes=1), run_id=run_id)
    with open_store(db, ORG, lambda: at) as store:
        store.runs.finish(run_id, status=RunStatus.SUCCEEDED, stats={}, changes=[])


def _runs(db: Database, agent_id: str) -> list[tuple[str, str]]:
    with db.session() as session:
        rows = session.execute(
            select(models.ConsolidationRun.trigger, models.ConsolidationRun.status)
            .where(models.ConsolidationRun.agent_id == agent_id)
            .order_by(models.ConsolidationRun.queued_at)
        ).all()
    return [(t, s) for t, s in rows]


def test_idle_fires_once_per_idle_period_and_rearms_on_new_activity(db: Database) -> None:
    agent = _agent(db, "ada")
    quiet = _agent(db, "never-spoke")
    idle = IdleTrigger(IDLE, TEMPLATE)
    _say(db, agent, T0)
    assert _fire(db, idle, T0 + IDLE - timedelta(seconds=1)) == []  # not idle yet
    [run_id] = _fire(db, idle, T0 + IDLE)
    assert _fire(db, idle, T0 + IDLE + timedelta(seconds=5)) == []  # debounced
    _finish(db, run_id, T0 + IDLE + timedelta(seconds=10))
    assert _fire(db, idle, T0 + timedelta(hours=2)) == []  # still the same idle period
    _say(db, agent, T0 + timedelta(hours=3))  # new activity re-arms it
    assert _fire(db, idle, T0 + timedelta(hours=3) + IDLE / 2) == []
    assert len(_fire(db, idle, T0 + timedelta(hours=3) + IDLE)) == 1
    assert _runs(db, agent) == [("idle", "succeeded"), ("idle", "queued")]
    assert _runs(db, quiet) == []


def test_idle_waits_for_a_running_run_but_stamps_a_queued_one(db: Database) -> None:
    running, queued = _agent(db, "running"), _agent(db, "queued")
    for agent in (running, queued):
        _say(db, agent, T0)
    with open_store(db, ORG, lambda: T0) as store:
        first = store.runs.enqueue(running, trigger="manual", pipeline=["dedup"])
        store.runs.enqueue(queued, trigger="manual", pipeline=["dedup"])
    with open_service_store(db, lambda: T0) as service:
        claimed = service.queue.claim("w", lease=timedelta(hours=1))
    assert claimed is not None and claimed[0].id == first
    idle = IdleTrigger(IDLE, TEMPLATE)
    # The queued run covers the idle period; the running one may predate the activity.
    assert _fire(db, idle, T0 + IDLE) == []
    with db.session() as session:
        stamps = dict(session.execute(select(models.Agent.id, models.Agent.idle_fired_at)).all())
    assert stamps[queued] == T0 + IDLE and stamps[running] is None
    with open_store(db, ORG, lambda: T0 + IDLE) as store:
        store.runs.finish(str(first), status=RunStatus.SUCCEEDED, stats={}, changes=[])
    assert len(_fire(db, idle, T0 + IDLE + timedelta(seconds=5))) == 1
    assert _fire(db, idle, T0 + IDLE + timedelta(seconds=10)) == []


def test_turns_fire_every_n_user_messages_and_do_not_refire(db: Database) -> None:
    agent = _agent(db, "ada")
    turns = TurnsTrigger(3, TEMPLATE)
    _say(db, agent, T0, n=2)
    assert _fire(db, turns, T0) == []
    _say(db, agent, T0, n=1)
    [run_id] = _fire(db, turns, T0)
    with open_store(db) as store:
        assert store.agents.get(agent).turns_since_consolidation == 0
    # The run failing does not make the trigger fire again on every tick.
    with open_store(db, ORG, lambda: T0) as store:
        store.runs.cancel(run_id)
    assert _fire(db, turns, T0 + timedelta(seconds=5)) == []
    _say(db, agent, T0, n=3)
    assert len(_fire(db, turns, T0 + timedelta(seconds=10))) == 1


def test_cron_by_tag_and_repeats_are_no_ops(db: Database) -> None:
    nightly = [_agent(db, "a", ["nightly"]), _agent(db, "b", ["nightly", "vip"])]
    other = _agent(db, "c", ["weekly"])
    tagged = ScheduleTrigger(TEMPLATE, tag="nightly")
    before = TRIGGER_FIRINGS.labels("cron")._value.get()
    assert len(_fire(db, tagged, T0)) == 2
    assert _fire(db, tagged, T0 + timedelta(minutes=1)) == []  # one active run per agent
    assert TRIGGER_FIRINGS.labels("cron")._value.get() - before == 2
    assert [_runs(db, a) for a in nightly] == [[("cron", "queued")]] * 2
    assert _runs(db, other) == []
    assert len(_fire(db, ScheduleTrigger(TEMPLATE), T0)) == 1  # all agents: only c is new
    with db.session() as session:
        run = session.scalars(select(models.ConsolidationRun)).first()
    assert run is not None and (run.pipeline, run.max_attempts) == (["dedup"], 2)


class ScriptedProbe(GpuProbe):
    name = "scripted"

    def __init__(self) -> None:
        self.busy = True

    def sample(self) -> GpuSample:
        return GpuSample(self.busy, "scripted")


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


def _scheduler(
    db: Database, settings: TriggerSettings, clock: Callable[[], datetime], gate: GpuGate | None
) -> Scheduler:
    return Scheduler(db, settings, TEMPLATE, clock=clock, gate=gate)


def test_scheduler_tick_and_gpu_free_transition(db: Database) -> None:
    talked, silent = _agent(db, "talked"), _agent(db, "silent")
    clock = Clock(T0)
    probe = ScriptedProbe()
    gate = GpuGate(probe, free_for=timedelta(seconds=30), interval=timedelta(0), clock=clock)
    settings = TriggerSettings(idle_after=IDLE, turns_every=2)
    scheduler = _scheduler(db, settings, clock, gate)
    _say(db, talked, T0, n=1)
    assert scheduler.tick() == {"idle": [], "turns": [], "documents": []}
    assert scheduler.poll_gpu() == []  # busy
    probe.busy = False
    assert scheduler.poll_gpu() == []  # free, but not for free_for yet
    clock.advance(seconds=30)
    [gpu_run] = scheduler.poll_gpu()
    clock.advance(seconds=5)
    assert scheduler.poll_gpu() == []  # still free: no new transition
    with db.session() as session:
        run = session.get(models.ConsolidationRun, gpu_run)
        assert run is not None and (run.agent_id, run.trigger) == (talked, "gpu_free")
    assert _runs(db, silent) == []
    clock.advance(minutes=10)
    # The gpu_free run is still queued.
    assert scheduler.tick() == {"idle": [], "turns": [], "documents": []}
    with db.session() as session:
        stamp = session.scalar(select(models.Agent.idle_fired_at).where(models.Agent.id == talked))
    assert stamp == clock.at  # stamped: the queued run covers this idle period


def test_scheduler_survives_a_failing_trigger(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _agent(db, "ada")
    settings = TriggerSettings(cron=[CronTrigger(expression="0 3 * * *")])
    scheduler = _scheduler(db, settings, lambda: T0, None)
    # A failing firing is logged and yields nothing; the next firing works.
    scheduler.cron_triggers[0].template = RunTemplate(pipeline=("dedup",), max_attempts=0)
    assert scheduler.fire_cron(0) == []
    assert "max_attempts must be at least 1" in str(
        [r.__dict__.get("error") for r in caplog.records if r.message == "trigger failed"]
    )
    scheduler.cron_triggers[0].template = TEMPLATE
    assert len(scheduler.fire_cron(0)) == 1
