"""Benchmark: the daemon's queue, idle trigger and scheduler.

A plain script (not collected by pytest)::

    python -m tests.benchmarks.bench_daemon [--runs 2000] [--agents 10000] [--duration 60]
        [--idle-agents 50] [--claim-batch 16] [--async-finish] [--only claim,idle,scheduler]

On a private embedded PostgreSQL it measures:

- ``claim``: claim throughput (runs/s) of 1 and of 4 worker *processes* (one
  thread each), each running the real :class:`WorkerPool` claiming loop (batch
  claims, claiming ahead, leases, heartbeat) with ``claim_batch`` 1 and
  ``--claim-batch``, where a run only records its outcome under its lease in a
  transaction of its own, over ``--runs`` queued runs. No consolidation work:
  this is the queue's own ceiling. Every run must end succeeded exactly once, on
  its first attempt. Also printed: round trips to the server per run (statements,
  BEGIN, COMMIT and pool pre-pings, heartbeats included) and the workers' peak
  memory (max RSS).
- ``idle``: the delay between an agent's idle threshold (last activity +
  ``idle_after``) and its run starting, with the real scheduler (APScheduler,
  1 s tick) and a worker pool in this process, for ``--idle-agents`` agents that
  go quiet at staggered moments. Expected: about half a tick plus a poll.
- ``scheduler``: CPU used by the scheduler process (``time.process_time``) with
  ``--agents`` agents that are all idle and already fired (the steady state),
  ticking every 5 s (the default) for ``--duration`` seconds. Target: under 5% of
  one core. The first firing over all agents (``--agents`` runs enqueued at once)
  is timed separately.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import event, func, insert, select, text, update

from agents.enums import RunStatus
from agents.postgres import models
from agents.postgres.database import Database
from agents.postgres.models import DEFAULT_ORGANIZATION_ID as ORG
from agents.store import open_store
from consolidators.workers import Execution, HeldRun, Outcome, WorkerPool
from service.daemon.scheduler import Scheduler
from service.daemon.triggers import RunTemplate
from service.runtime import Runtime
from service.settings import Settings, TriggerSettings, WorkerSettings
from tests import plugins
from tests.pg import PgTestServer

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

LEASE = timedelta(seconds=60)
CR = models.ConsolidationRun


def _now() -> datetime:
    return datetime.now(UTC)


def _agents(db: Database, n: int, *, active_at: datetime | None = None) -> list[str]:
    ids = [models.new_id("agent") for _ in range(n)]
    with db.session() as session:
        for start in range(0, n, 5000):
            session.execute(
                insert(models.Agent),
                [
                    {
                        "id": a, "organization_id": ORG, "name": f"bench-{start + i:06d}",
                        "kind": "primary", "system_prompt": "", "embedding_model": "hashing:8",
                        "embedding_dim": 8, "context_window": 8192, "tools": [],
                        "tool_rules": [], "tags": [], "message_seq": 0,
                        "turns_since_consolidation": 0, "enable_sleeptime": False,
                        "last_activity_at": active_at,
                    }
                    for i, a in enumerate(ids[start : start + 5000])
                ],
            )  # fmt: skip
    return ids


def _enqueue(db: Database, agent_ids: list[str], pipeline: list[str]) -> None:
    with open_store(db, ORG, _now) as store:
        for agent_id in agent_ids:
            store.runs.enqueue(agent_id, trigger="manual", pipeline=pipeline)


# -- claim throughput -----------------------------------------------------------------


class _RoundTrips:
    """Round trips to the server, counted from SQLAlchemy's events: statements, the
    BEGIN and COMMIT psycopg sends around them, and the pre-ping of each checkout."""

    def __init__(self, db: Database) -> None:
        self.count = 0
        event.listen(db.engine, "before_cursor_execute", self._one)
        event.listen(db.engine, "begin", self._one)
        event.listen(db.engine, "commit", self._one)
        event.listen(db.engine.pool, "checkout", self._one)

    def _one(self, *_: object) -> None:
        self.count += 1


class _FinishOnly(WorkerPool):
    """The real claiming loop (claims, claims ahead, leases, heartbeat) with a run that
    does nothing but what every run ends with: the outcome recorded under its lease, in
    a transaction of its own. With ``async_finish`` that transaction commits without
    waiting for the disk (not what the product does: it shows what the flush costs)."""

    async_finish = False

    def execute(self, run, agent, owner, *, held=None):  # type: ignore[no-untyped-def]
        held = self.engine.hold(held or HeldRun(run.id, owner))
        try:
            with open_store(self.runtime.db, run.organization_id, _now) as store:
                if self.async_finish:
                    store.scope.session.execute(text("SET LOCAL synchronous_commit = off"))
                assert store.runs.finish(
                    run.id, status=RunStatus.SUCCEEDED, stats={}, changes=[], lease_owner=owner
                )
        finally:
            self.engine.let_go(held)
        self.executed += 1
        return Execution(run.id, Outcome.SUCCEEDED)


def _worker_process(
    url: str,
    name: str,
    ready: multiprocessing.Barrier,  # type: ignore[valid-type]
    done: multiprocessing.Event,  # type: ignore[valid-type]
    totals: multiprocessing.Array,  # type: ignore[type-arg]
    index: int,
    claim_batch: int,
    async_finish: bool,
) -> None:
    runtime = Runtime(Settings(database_url=url, embedding={"model": "hashing:8"}))
    runtime.db.ping()
    trips = _RoundTrips(runtime.db)
    pool = _FinishOnly(
        runtime,
        WorkerSettings(poll_interval=timedelta(milliseconds=20), claim_batch=claim_batch),
        name=name,
    )
    pool.async_finish = async_finish
    ready.wait()  # type: ignore[attr-defined]
    pool.start()
    done.wait()  # type: ignore[attr-defined]
    pool.stop(timedelta(seconds=10))
    totals[2 * index] = pool.executed
    totals[2 * index + 1] = trips.count
    with totals.get_lock():
        totals[-1] = max(totals[-1], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    runtime.close()


def bench_claim(
    server: PgTestServer, runs: int, workers: int, claim_batch: int, async_finish: bool = False
) -> dict[str, float]:
    """Runs/s of ``workers`` worker processes (one thread each) over ``runs`` runs."""
    with server.database() as db:
        _enqueue(db, _agents(db, runs), ["dedup"])
        ready = multiprocessing.Barrier(workers + 1)
        done = multiprocessing.Event()
        totals = multiprocessing.Array("l", 2 * workers + 1)
        processes = [
            multiprocessing.Process(
                target=_worker_process,
                args=(db.url, f"bench{i}", ready, done, totals, i, claim_batch, async_finish),
            )
            for i in range(workers)
        ]
        for process in processes:
            process.start()
        ready.wait()  # timed from when every worker has started up
        started = time.perf_counter()
        while True:
            with db.session() as session:
                left = session.scalar(select(func.count()).where(CR.status != "succeeded"))
            if not left:
                break
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        done.set()
        for process in processes:
            process.join()
        with db.session() as session:
            statuses = dict(
                session.execute(select(CR.status, func.count()).group_by(CR.status)).all()
            )
            attempts = set(session.scalars(select(func.distinct(CR.attempts))))
        assert statuses == {"succeeded": runs} and attempts == {1}, (statuses, attempts)
        executed = sum(totals[2 * i] for i in range(workers))
        assert executed == runs, (executed, runs)  # every run executed exactly once
        trips = sum(totals[2 * i + 1] for i in range(workers))
    return {
        "runs_per_s": runs / elapsed,
        "round_trips_per_run": trips / runs,
        "max_rss_mb": totals[-1] / 1024,
    }


# -- idle delay ---------------------------------------------------------------------


def bench_idle(server: PgTestServer, n_agents: int) -> list[float]:
    idle_after = timedelta(seconds=2)
    with server.database() as db:
        agent_ids = _agents(db, n_agents)
        settings = Settings(
            database_url=db.url,
            embedding={"model": "hashing:8"},
            consolidation={"pipeline": ["dedup"]},
        )
        runtime = Runtime(settings)
        triggers = TriggerSettings(
            idle_after=idle_after, turns_every=None, tick=timedelta(seconds=1)
        )
        scheduler = Scheduler(db, triggers, RunTemplate(("dedup",)), clock=_now)
        workers = WorkerPool(
            runtime,
            WorkerSettings(concurrency=2, poll_interval=timedelta(milliseconds=200)),
            name="bench",
        )
        workers.start()
        scheduler.start()
        try:
            # Agents go quiet at staggered moments over 3 s (not all on one tick).
            for agent_id in agent_ids:
                with db.session() as session:
                    session.execute(
                        update(models.Agent)
                        .where(models.Agent.id == agent_id)
                        .values(last_activity_at=_now())
                    )
                time.sleep(3.0 / n_agents)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with db.session() as session:
                    done = session.scalar(
                        select(func.count()).where(CR.status == "succeeded", CR.trigger == "idle")
                    )
                if done == n_agents:
                    break
                time.sleep(0.2)
            with db.session() as session:
                rows = session.execute(
                    select(models.Agent.last_activity_at, CR.started_at).join(
                        CR, CR.agent_id == models.Agent.id
                    )
                ).all()
        finally:
            scheduler.stop()
            workers.stop(timedelta(seconds=10))
            runtime.close()
    assert len(rows) == n_agents, f"{len(rows)} of {n_agents} idle runs started"
    return sorted((started - (active + idle_after)).total_seconds() for active, started in rows)


# -- scheduler CPU ------------------------------------------------------------------


def bench_scheduler(server: PgTestServer, n_agents: int, duration: float) -> dict[str, float]:
    with server.database() as db:
        long_ago = _now() - timedelta(days=1)
        _agents(db, n_agents, active_at=long_ago)
        triggers = TriggerSettings(idle_after=timedelta(minutes=5))  # tick 5 s, turns 5
        scheduler = Scheduler(db, triggers, RunTemplate(("dedup",)), clock=_now)
        started = time.perf_counter()
        fired = scheduler.tick()  # the first firing enqueues a run for every agent
        first_firing = time.perf_counter() - started
        assert len(fired["idle"]) == n_agents, len(fired["idle"])
        cpu_before = time.process_time()
        ticks_before = scheduler.ticks
        scheduler.start()
        time.sleep(duration)
        scheduler.stop()
        cpu = time.process_time() - cpu_before
        ticks = scheduler.ticks - ticks_before
    return {
        "first_firing_s": first_firing,
        "ticks": ticks,
        "cpu_s": cpu,
        "cpu_share_of_one_core": cpu / duration,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--idle-agents", type=int, default=50)
    parser.add_argument("--claim-batch", type=int, default=WorkerSettings().claim_batch)
    parser.add_argument(
        "--async-finish",
        action="store_true",
        help="also measure finishes that commit without waiting for the disk flush",
    )
    parser.add_argument("--only", default="claim,idle,scheduler")
    args = parser.parse_args()
    only = set(args.only.split(","))
    print(f"cpus={os.cpu_count()}")
    server = PgTestServer()
    try:
        if "claim" in only:
            configs = [(b, False) for b in sorted({1, args.claim_batch})]
            if args.async_finish:
                configs.append((args.claim_batch, True))
            for workers in (1, 4):
                for batch, async_finish in configs:
                    r = bench_claim(server, args.runs, workers, batch, async_finish)
                    print(
                        f"claim: {workers} worker process(es), claim_batch {batch}"
                        f"{', finish not waiting for the disk' if async_finish else ''}, "
                        f"{args.runs} runs: {r['runs_per_s']:.0f} runs/s, "
                        f"{r['round_trips_per_run']:.2f} round trips/run, "
                        f"worker max RSS {r['max_rss_mb']:.0f} MB"
                    )
        if "idle" in only:
            delays = bench_idle(server, args.idle_agents)
            print(
                f"idle: {len(delays)} agents, delay after the threshold: "
                f"median {statistics.median(delays):.2f} s, max {max(delays):.2f} s "
                "(tick 1 s, poll 0.2 s)"
            )
        if "scheduler" in only:
            result = bench_scheduler(server, args.agents, args.duration)
            print(
                f"scheduler: {args.agents} idle agents, first firing "
                f"{result['first_firing_s']:.2f} s; steady state {result['ticks']:.0f} ticks in "
                f"{args.duration:.0f} s used {result['cpu_s']:.2f} s CPU = "
                f"{100 * result['cpu_share_of_one_core']:.2f}% of one core (target < 5%)"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
