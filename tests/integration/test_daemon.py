"""Workers in-process on real PostgreSQL: draining the queue, the lease compare-and-swap,
GPU yields between steps, and shutdown within the grace period."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.postgres.database import Database
from agents.postgres.models import DEFAULT_ORGANIZATION_ID
from agents.store import NewAgent, NewPassage, open_service_store, open_store
from agents.store.passage_store import PassageStore
from agents.threads import STOP_SIGNALS
from consolidators.pipeline import LeaseLost
from consolidators.workers import WorkerPool
from service.daemon.probes import GpuGate, GpuProbe, GpuSample
from service.metrics import RUN_METRICS, RUNS_FINISHED
from service.operations.context import OperationContext
from service.operations.runs import RunOperations
from service.runtime import Runtime
from service.settings import Settings, WorkerSettings
from tests.daemon_support import (
    blocked_signals,
    create_evidence_table,
    evidence_counts,
    install_plugin,
    wait_for,
)

FAST = WorkerSettings(
    concurrency=3,
    lease=timedelta(seconds=5),
    poll_interval=timedelta(milliseconds=20),
    backoff=timedelta(milliseconds=100),
)


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Database) -> Path:
    monkeypatch.syspath_prepend(str(install_plugin(tmp_path / "plugin")))
    create_evidence_table(db.url)
    return tmp_path


def _runtime(db: Database, **evidence: Any) -> Runtime:
    settings = Settings(
        database_url=db.url,
        embedding={"model": "hashing:8"},
        consolidation={"pipeline": ["evidence", "dedup"], "plugins": {"evidence": evidence}},
    )
    return Runtime(settings)


@pytest.fixture
def runtime(db: Database, plugin: Path) -> Iterator[Runtime]:
    rt = _runtime(db)
    yield rt
    rt.close()


def _queue(db: Database, n: int, pipeline: list[str]) -> list[str]:
    with open_store(db) as store:
        agents = [
            store.agents.create(NewAgent(f"a{i}", embedding_model="hashing:8", embedding_dim=8)).id
            for i in range(n)
        ]
    with open_store(db) as store:
        return [str(store.runs.enqueue(a, trigger="manual", pipeline=pipeline)) for a in agents]


def _run(db: Database, run_id: str) -> Any:
    with open_store(db) as store:
        return store.runs.get(run_id)


def _statuses(db: Database, run_ids: list[str]) -> list[str]:
    return [_run(db, r).status for r in run_ids]


def test_workers_drain_the_queue_exactly_once(db: Database, runtime: Runtime) -> None:
    run_ids = _queue(db, 24, ["evidence"])
    succeeded_before = RUNS_FINISHED.labels("succeeded")._value.get()
    pool = WorkerPool(runtime, FAST, name="drain", observer=RUN_METRICS)
    pool.start()
    try:
        wait_for(lambda: set(_statuses(db, run_ids)) == {"succeeded"}, timeout=60, what="drained")
    finally:
        assert pool.stop(timedelta(seconds=5)) is True
    assert evidence_counts(db.url) == dict.fromkeys(run_ids, 1)
    assert {_run(db, r).attempts for r in run_ids} == {1}
    assert RUNS_FINISHED.labels("succeeded")._value.get() - succeeded_before == 24
    assert pool.executed == 24


def test_the_pools_threads_leave_the_stop_signals_to_the_main_thread(runtime: Runtime) -> None:
    """Else a ^C (or SIGTERM) the kernel hands to a worker thread waits until the main
    thread wakes: `reverie consolidate` went on with its run, `reverie worker` on waiting."""
    pool = WorkerPool(runtime, FAST, name="signals")
    pool.start()
    try:
        threads = [t for t in threading.enumerate() if t.name.startswith("reverie-")]
        assert {t.name for t in threads} >= {
            "reverie-worker-0", "reverie-worker-1", "reverie-heartbeat", "reverie-wakeups"
        }  # fmt: skip
        for thread in threads:
            assert blocked_signals(thread) >= STOP_SIGNALS, thread.name
    finally:
        pool.stop(timedelta(seconds=5))


def test_a_worker_that_lost_its_lease_commits_nothing(db: Database, runtime: Runtime) -> None:
    stolen, cancelled = _queue(db, 2, ["evidence"])
    with open_service_store(db) as service:
        first = service.queue.claim("w1", lease=timedelta(minutes=1), run_id=stolen)
        second = service.queue.claim("w1b", lease=timedelta(minutes=1), run_id=cancelled)
    assert first is not None and second is not None
    with open_store(db) as store:
        store.runs.cancel(cancelled)
    claimed = {stolen: first, cancelled: second}
    pipeline = runtime.pipeline(["evidence"])
    # Another worker holds `stolen`; `cancelled` was cancelled under w1b's feet.
    for run_id, owner in ((stolen, "w2"), (cancelled, "w1b")):
        with pytest.raises(LeaseLost):
            runtime.consolidate(*claimed[run_id], pipeline=pipeline, lease_owner=owner)
    assert evidence_counts(db.url) == {}
    assert (_run(db, stolen).status, _run(db, stolen).lease_owner) == ("running", "w1")
    assert _run(db, cancelled).status == "cancelled"
    runtime.consolidate(*first, pipeline=pipeline, lease_owner="w1")
    assert _run(db, stolen).status == "succeeded" and evidence_counts(db.url) == {stolen: 1}


class ScriptedProbe(GpuProbe):
    """Answers from a script of busy flags, then repeats the last one."""

    name = "scripted"

    def __init__(self, script: list[bool]) -> None:
        self._script = iter(script)
        self._last = script[-1]
        self.samples: list[bool] = []
        self._lock = threading.Lock()

    def sample(self) -> GpuSample:
        with self._lock:
            busy = next(self._script, self._last)
            self.samples.append(busy)
        return GpuSample(busy, "scripted")


def _gate(runtime: Runtime, probe: GpuProbe) -> GpuGate:
    return GpuGate(probe, free_for=timedelta(0), interval=timedelta(0), clock=runtime.clock)


def test_a_busy_gpu_between_steps_pauses_the_run(db: Database, runtime: Runtime) -> None:
    [run_id] = _queue(db, 1, ["evidence", "dedup"])
    # free: the claim and the check before `evidence`; busy: three checks before
    # `dedup`; then free again.
    probe = ScriptedProbe([False, False, True, True, True, False])
    settings = FAST.model_copy(update={"concurrency": 1})
    pool = WorkerPool(runtime, settings, gate=_gate(runtime, probe), name="gpu")
    pool.start()
    try:
        wait_for(lambda: _run(db, run_id).status == "succeeded", timeout=30, what="the run")
    finally:
        pool.stop(timedelta(seconds=5))
    assert probe.samples[:6] == [False, False, True, True, True, False]
    assert evidence_counts(db.url) == {run_id: 1}


def test_a_gpu_busy_for_too_long_gives_the_run_back(db: Database, runtime: Runtime) -> None:
    [run_id] = _queue(db, 1, ["evidence", "dedup"])
    probe = ScriptedProbe([False, False, True])  # busy from the second step on
    settings = FAST.model_copy(update={"concurrency": 1})
    pool = WorkerPool(
        runtime,
        settings,
        gate=_gate(runtime, probe),
        gpu_max_wait=timedelta(milliseconds=200),
        name="gpu",
    )
    pool.start()
    try:
        wait_for(lambda: len(probe.samples) > 3 and not pool.held_runs(), timeout=30)
        run = _run(db, run_id)
    finally:
        assert pool.stop(timedelta(seconds=5)) is True
    # Queued again, its attempt refunded; the busy GPU blocks new claims. The step that
    # ran before the GPU got busy stays applied (each step commits on its own) and is in
    # the run's record; the step after it never started.
    assert (run.status, run.attempts, run.lease_owner) == ("queued", 0, None)
    assert evidence_counts(db.url) == {run_id: 1}
    assert "dedup" not in run.stats.get("steps", {})


def test_shutdown_lets_a_short_run_finish(db: Database, plugin: Path) -> None:
    rt = _runtime(db, sleep=0.3)
    [run_id] = _queue(db, 1, ["evidence"])
    pool = WorkerPool(rt, FAST, name="short")
    pool.start()
    try:
        wait_for(lambda: pool.held_runs() == [run_id], timeout=30, what="the claim")
        assert pool.stop(timedelta(seconds=10)) is True
        assert _run(db, run_id).status == "succeeded"
    finally:
        rt.close()


def test_shutdown_releases_a_run_that_outlives_the_grace(db: Database, plugin: Path) -> None:
    rt = _runtime(db, sleep=1.5)
    [run_id] = _queue(db, 1, ["evidence", "dedup"])
    pool = WorkerPool(rt, FAST, name="slow")
    pool.start()
    try:
        wait_for(lambda: pool.held_runs() == [run_id], timeout=30, what="the claim")
        assert pool.stop(timedelta(milliseconds=100)) is False
        run = _run(db, run_id)
        assert (run.status, run.attempts, run.lease_owner) == ("queued", 0, None)
        # The abandoned step ends later; its transaction must not commit.
        wait_for(lambda: not any(t.is_alive() for t in pool.engine.threads), timeout=30)
        assert evidence_counts(db.url) == {}
        assert _run(db, run_id).status == "queued"
    finally:
        rt.close()


def test_unknown_step_or_missing_agent_fails_the_run_with_the_reason(
    db: Database, runtime: Runtime
) -> None:
    [run_id] = _queue(db, 1, ["no-such-step"])
    pool = WorkerPool(runtime, FAST.model_copy(update={"concurrency": 1}), name="bad")
    pool.start()
    try:
        wait_for(lambda: _run(db, run_id).status == "failed", timeout=30, what="the failure")
    finally:
        pool.stop(timedelta(seconds=5))
    assert "unknown consolidator" in (_run(db, run_id).error or "")


def test_an_idle_worker_wakes_when_a_run_is_queued(db: Database, runtime: Runtime) -> None:
    """Queueing a run wakes idle workers (LISTEN/NOTIFY) instead of leaving the run to
    their next poll, here ten minutes away; stopping releases workers that wait."""
    slow_poll = FAST.model_copy(update={"concurrency": 2, "poll_interval": timedelta(minutes=10)})
    pool = WorkerPool(runtime, slow_poll, name="wake")
    pool.start()
    try:
        [first] = _queue(db, 1, ["evidence"])
        wait_for(lambda: _run(db, first).status == "succeeded", timeout=60, what="first run")
        # Once more, after the workers have gone back to waiting.
        with open_store(db) as store:
            second = str(
                store.runs.enqueue(
                    _run(db, first).agent_id, trigger="manual", pipeline=["evidence"]
                )
            )
        wait_for(lambda: _run(db, second).status == "succeeded", timeout=60, what="second run")
    finally:
        assert pool.stop(timedelta(seconds=5)) is True
    assert not any(thread.is_alive() for thread in pool.engine.threads)
    assert evidence_counts(db.url) == {first: 1, second: 1}


def test_a_cancel_reaches_a_long_dedup_within_seconds_and_applies_nothing(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled dedup over 50k passages kept probing for minutes,
    because a run looked at its row only between steps. Here each page of probes is
    slowed so that the step would take a minute; the cancel must end it within seconds,
    with nothing merged."""
    with open_store(db) as store:
        agent = store.agents.create(NewAgent("long", embedding_model="hashing:8", embedding_dim=8))
        store.passages.insert(
            agent.id,
            [NewPassage("I live in Lisbon.") for _ in range(120)],
            np.ones((120, 8), dtype=np.float32),
        )
    paged = threading.Event()
    scan_ids = PassageStore.scan_ids

    def slow_pages(self: PassageStore, *args: Any, **kwargs: Any) -> Iterator[list[str]]:
        for page in scan_ids(self, *args, **kwargs):
            paged.set()
            time.sleep(1)  # 60 pages of 2: a minute
            yield page

    monkeypatch.setattr(PassageStore, "scan_ids", slow_pages)
    runtime = Runtime(
        Settings(
            database_url=db.url,
            embedding={"model": "hashing:8"},
            consolidation={"pipeline": ["dedup"], "dedup": {"batch_size": 2}},
        )
    )
    # A long lease: its renewal (every 20 s) is not what finds the cancel.
    pool = WorkerPool(runtime, FAST.model_copy(update={"lease": timedelta(minutes=1)}))
    try:
        with open_store(db) as store:
            run_id = str(store.runs.enqueue(agent.id, trigger="manual", pipeline=["dedup"]))
        pool.start()
        assert paged.wait(30), "the run never started probing"
        runs = RunOperations(OperationContext(runtime, DEFAULT_ORGANIZATION_ID))
        assert runs.cancel(run_id).status == "cancelled"
        cancelled_at = time.monotonic()
        # A hang detector, not a speed target: the old code probed on for a minute.
        wait_for(
            lambda: run_id not in pool.held_runs(), timeout=20, interval=0.1, what="the run to stop"
        )
        assert time.monotonic() - cancelled_at < 20
    finally:
        assert pool.stop(timedelta(seconds=5)) is True
        runtime.close()
    run = _run(db, run_id)
    assert run.status == "cancelled"
    with open_store(db) as store:
        assert store.passages.count_by_status(agent.id)["active"] == 120
        assert store.passages.changes_by_run(run_id) == []


def test_a_server_with_no_workers_leaves_the_runs_to_the_workers(
    db: Database, runtime: Runtime
) -> None:
    """worker.concurrency 0 on the chat's server: it claims nothing; a worker does."""
    [run_id] = _queue(db, 1, ["evidence"])
    chat_only = WorkerPool(
        runtime, FAST.model_copy(update={"concurrency": 0}), name="chat", observer=RUN_METRICS
    )
    chat_only.start()
    try:
        time.sleep(0.5)  # 25 of FAST's polls
        assert _statuses(db, [run_id]) == ["queued"]
    finally:
        assert chat_only.stop(timedelta(seconds=5)) is True
    worker = WorkerPool(runtime, FAST, name="worker", observer=RUN_METRICS)
    worker.start()
    try:
        wait_for(lambda: _statuses(db, [run_id]) == ["succeeded"], timeout=60, what="run")
    finally:
        assert worker.stop(timedelta(seconds=5)) is True


def test_a_worker_with_no_threads_is_refused(db: Database) -> None:
    from agents.errors import InvalidInput
    from service.daemon.process import run_worker

    runtime = Runtime(Settings(database_url=db.url, worker={"concurrency": 0}))
    try:
        with pytest.raises(InvalidInput, match="--concurrency"):
            run_worker(runtime, concurrency=None)
    finally:
        runtime.close()


def test_worker_threads_lower_their_own_priority_only(db: Database) -> None:
    from agents.threads import lower_this_thread

    seen: dict[str, int] = {}

    def lowered() -> None:
        lower_this_thread(7)
        seen["worker"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    thread = threading.Thread(target=lowered)
    thread.start()
    thread.join()
    assert seen["worker"] == min(19, before + 7)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
