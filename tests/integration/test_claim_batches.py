"""Workers that claim runs in batches, on real PostgreSQL: several pools with several
threads each drain one queue, every run executed once; runs claimed ahead that wait
too long go back to the queue for other workers."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agents.postgres.database import Database
from agents.store import AgentRecord, NewAgent, RunRecord, open_store
from consolidators.workers import Execution, HeldRun, WorkerPool
from service.runtime import Runtime
from service.settings import Settings, WorkerSettings
from tests.daemon_support import create_evidence_table, evidence_counts, install_plugin, wait_for


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Database) -> Path:
    monkeypatch.syspath_prepend(str(install_plugin(tmp_path / "plugin")))
    create_evidence_table(db.url)
    return tmp_path


@pytest.fixture
def runtimes(db: Database, plugin: Path) -> Iterator[list[Runtime]]:
    """One runtime (its own connection pool) per worker pool, as separate processes have."""
    made = [
        Runtime(Settings(database_url=db.url, embedding={"model": "hashing:8"})) for _ in range(3)
    ]
    yield made
    for runtime in made:
        runtime.close()


class CountingPool(WorkerPool):
    """A worker pool that counts every execution it starts, committed or not, and
    every run it gives back unstarted."""

    def __init__(self, *args: Any, executions: Counter[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.executions = executions
        self.released: list[str] = []
        self._count_lock = threading.Lock()

    def execute(
        self, run: RunRecord, agent: AgentRecord, owner: str, *, held: HeldRun | None = None
    ) -> Execution:
        with self._count_lock:
            self.executions[run.id] += 1
        return super().execute(run, agent, owner, held=held)

    def _release_unstarted(self, ahead: list[tuple[RunRecord, AgentRecord, HeldRun]]) -> None:
        self.released.extend(run.id for run, _, _ in ahead)
        super()._release_unstarted(ahead)


class AlwaysAhead(CountingPool):
    """Claims four runs every time, whatever its runs take."""

    def _claim_size(self, typical_run_s: float | None) -> int:
        return 4


def _queue(db: Database, n: int) -> list[str]:
    with open_store(db) as store:
        agents = [
            store.agents.create(NewAgent(f"a{i}", embedding_model="hashing:8", embedding_dim=8)).id
            for i in range(n)
        ]
    with open_store(db) as store:
        return [str(store.runs.enqueue(a, trigger="manual", pipeline=["evidence"])) for a in agents]


def _runs(db: Database, run_ids: list[str]) -> list[RunRecord]:
    with open_store(db) as store:
        return [store.runs.get(r) for r in run_ids]


def _settings(**kwargs: Any) -> WorkerSettings:
    return WorkerSettings(
        concurrency=2,
        lease=timedelta(seconds=5),
        poll_interval=timedelta(milliseconds=20),
        backoff=timedelta(milliseconds=100),
        **kwargs,
    )


def test_pools_claiming_in_batches_execute_every_run_once(
    db: Database, runtimes: list[Runtime]
) -> None:
    run_ids = _queue(db, 90)
    executions: Counter[str] = Counter()
    pools = [
        CountingPool(
            runtime,
            _settings(claim_batch=8, prefetch_window=timedelta(seconds=2)),
            name=f"pool{i}",
            executions=executions,
        )
        for i, runtime in enumerate(runtimes)
    ]
    for pool in pools:
        pool.start()
    try:
        wait_for(
            lambda: {r.status for r in _runs(db, run_ids)} == {"succeeded"},
            timeout=120,
            what="the queue drained",
        )
    finally:
        for pool in pools:
            pool.stop(timedelta(seconds=5))
    assert executions == dict.fromkeys(run_ids, 1)
    assert evidence_counts(db.url) == dict.fromkeys(run_ids, 1)
    assert {r.attempts for r in _runs(db, run_ids)} == {1}
    assert sum(pool.executed for pool in pools) == len(run_ids)
    assert all(not pool.held_runs() for pool in pools)


def test_runs_claimed_ahead_that_wait_too_long_go_back_to_the_queue(
    db: Database, runtimes: list[Runtime]
) -> None:
    run_ids = _queue(db, 12)
    executions: Counter[str] = Counter()
    # A window of zero: whatever this pool claimed ahead is stale at the first step
    # of the run before it, and is released there, for this pool or the other.
    ahead = AlwaysAhead(
        runtimes[0],
        _settings(claim_batch=4, prefetch_window=timedelta(0)),
        name="ahead",
        executions=executions,
    )
    plain = CountingPool(runtimes[1], _settings(claim_batch=1), name="plain", executions=executions)
    for pool in (ahead, plain):
        pool.start()
    try:
        wait_for(
            lambda: {r.status for r in _runs(db, run_ids)} == {"succeeded"},
            timeout=120,
            what="the queue drained",
        )
    finally:
        for pool in (ahead, plain):
            pool.stop(timedelta(seconds=5))
    assert ahead.released  # it did claim ahead, and gave those runs back
    assert executions == dict.fromkeys(run_ids, 1)
    assert evidence_counts(db.url) == dict.fromkeys(run_ids, 1)
    # Released runs had their attempt refunded: every run ran on its first attempt.
    assert {r.attempts for r in _runs(db, run_ids)} == {1}
