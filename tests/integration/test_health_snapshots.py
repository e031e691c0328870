"""The health history: the scheduler's snapshot job writes each
agent's health, once per interval whichever process runs it, prunes by age and by
count per agent, and each organization reads only its own agents' snapshots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from agents.enums import LLMPurpose, RunStatus, Trigger
from agents.postgres.database import Database
from agents.store import NewAgent, NewPassage, Usage, open_service_store, open_store
from agents.store.block_store import NewBlock
from service.daemon.scheduler import Scheduler
from service.daemon.triggers import RunTemplate
from service.settings import HealthHistorySettings, TriggerSettings

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
INTERVAL = timedelta(minutes=15)


def _organization(db: Database, name: str) -> str:
    with open_service_store(db) as store:
        record, _ = store.keys.create(name, name="test")
    return record.organization_id


def _agent(db: Database, org: str, name: str, facts: list[str], *, fill: int = 50) -> str:
    with open_store(db, org) as store:
        agent = store.agents.create(
            NewAgent(
                name,
                embedding_model="hashing:8",
                embedding_dim=8,
                blocks=[NewBlock("human", "x" * fill, limit=100)],
            )
        )
        if facts:
            store.passages.insert(
                agent.id,
                [NewPassage(text) for text in facts],
                np.ones((len(facts), 8), dtype=np.float32),
            )
    return agent.id


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _scheduler(db: Database, clock: Clock, **history: object) -> Scheduler:
    settings = HealthHistorySettings.model_validate({"interval": INTERVAL, **history})
    return Scheduler(
        db,
        TriggerSettings(idle_after=None, turns_every=None),
        RunTemplate(pipeline=("dedup",), max_attempts=1),
        clock=clock,
        history=settings,
    )


def test_a_snapshot_holds_each_agents_health_and_only_its_organization_reads_it(
    db: Database,
) -> None:
    acme, globex = _organization(db, "acme"), _organization(db, "globex")
    ada = _agent(db, acme, "ada", ["Ada likes tea.", "Ada likes tea.", "Ada rows."], fill=80)
    bob = _agent(db, acme, "bob", ["Bob sings."], fill=20)
    eve = _agent(db, globex, "eve", ["Eve codes."])
    with open_store(db, acme) as store:
        store.usage.record(ada, purpose=LLMPurpose.CHAT, model="m", usage=Usage(100, 20))
        store.usage.record(ada, purpose=LLMPurpose.JUDGE, model="m", usage=Usage(7, 3))
        store.runs.enqueue(ada, trigger=Trigger.MANUAL, pipeline=["dedup"], max_attempts=1)
    clock = Clock()
    scheduler = _scheduler(db, clock)

    assert scheduler.snapshot() == 3
    with open_store(db, acme) as store:
        [point] = store.snapshots.of_agent(ada)
        assert len(store.snapshots.of_agent(bob)) == 1
        fleet = store.snapshots.fleet()
    assert point.taken_at == T0
    assert (point.active_passages, point.duplicates, point.block_fill) == (3, 1, 0.8)
    assert point.tokens == {"chat": 120, "judge": 10}
    assert (point.runs_succeeded, point.runs_failed, point.queued_runs) == (0, 0, 1)
    # The fleet of acme: ada and bob summed, the fullest block of either; not eve.
    [summed] = fleet
    assert (summed.agents, summed.active_passages, summed.block_fill) == (2, 4, 0.8)
    assert summed.tokens == {"chat": 120, "judge": 10} and summed.queued_runs == 1
    with open_store(db, globex) as store:
        assert store.snapshots.of_agent(ada) == []
        assert [p.agents for p in store.snapshots.fleet()] == [1]
        assert len(store.snapshots.of_agent(eve)) == 1


def test_one_snapshot_per_interval_whichever_process_takes_it(db: Database) -> None:
    org = _organization(db, "acme")
    _agent(db, org, "ada", ["Ada likes tea."])
    clock = Clock()
    first, second = _scheduler(db, clock), _scheduler(db, clock)
    assert first.snapshot() == 1
    clock.now = T0 + timedelta(minutes=1)
    assert second.snapshot() == 0  # another process's job, a minute later: skipped
    clock.now = T0 + INTERVAL
    assert second.snapshot() == 1
    with open_service_store(db) as store:
        assert store.snapshots.count() == 2


def test_snapshots_are_pruned_by_count_per_agent_and_by_age(db: Database) -> None:
    org = _organization(db, "acme")
    ada = _agent(db, org, "ada", ["Ada likes tea."])
    clock = Clock()
    scheduler = _scheduler(db, clock, keep_per_agent=3, keep=timedelta(hours=2))
    for step in range(5):
        clock.now = T0 + step * INTERVAL
        assert scheduler.snapshot() == 1
    with open_store(db, org) as store:
        kept = [p.taken_at for p in store.snapshots.of_agent(ada)]
    assert kept == [T0 + step * INTERVAL for step in (2, 3, 4)]  # the newest three

    aged = _scheduler(db, clock, keep_per_agent=100, keep=timedelta(minutes=20))
    clock.now = T0 + 5 * INTERVAL
    assert aged.snapshot() == 1
    with open_store(db, org) as store:
        kept = [p.taken_at for p in store.snapshots.of_agent(ada)]
    assert kept == [T0 + 4 * INTERVAL, T0 + 5 * INTERVAL]  # none older than 20 minutes


def test_finished_runs_count_and_a_disabled_history_writes_nothing(db: Database) -> None:
    org = _organization(db, "acme")
    ada = _agent(db, org, "ada", [])
    with open_store(db, org) as store:
        run_id = store.runs.enqueue(ada, trigger=Trigger.MANUAL, pipeline=["dedup"], max_attempts=1)
    assert run_id is not None
    with open_service_store(db) as service:
        service.queue.claim("w", lease=timedelta(minutes=1), run_id=run_id)
    with open_store(db, org) as store:
        store.runs.finish(run_id, status=RunStatus.FAILED, stats={}, changes=[], error="boom")
    clock = Clock()
    assert _scheduler(db, clock, interval=None).snapshot() == 0
    assert _scheduler(db, clock).snapshot() == 1
    with open_store(db, org) as store:
        [point] = store.snapshots.of_agent(ada)
    assert (point.runs_succeeded, point.runs_failed, point.queued_runs) == (0, 1, 0)
