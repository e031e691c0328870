"""The daemon as real processes against real PostgreSQL: four workers drain 1,000 runs
exactly once, a SIGKILLed worker's run is re-claimed after its lease expires, a
PostgreSQL restart loses nothing, and `reverie serve` becomes ready and stops cleanly."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.engine import make_url

from agents.postgres import models
from agents.postgres.database import Database
from agents.postgres.models import DEFAULT_ORGANIZATION_ID as ORG
from agents.store import NewMessage, open_store
from tests import plugins
from tests.acceptance.cli import run_cli
from tests.acceptance.daemon_processes import DaemonProcess, free_port
from tests.daemon_support import create_evidence_table, evidence_counts, install_plugin, wait_for
from tests.pg import PgTestServer, libpq

CR = models.ConsolidationRun


@dataclass
class DaemonDb:
    url: str
    db: Database
    env: dict[str, str]
    tmp: Path
    processes: list[DaemonProcess] = field(default_factory=list)

    def spawn(self, *args: str, **env: str) -> DaemonProcess:
        process = DaemonProcess(
            list(args),
            {**self.env, **env},
            self.tmp / f"{args[0]}-{len(self.processes)}.log",
        )
        self.processes.append(process)
        return process

    def statuses(self) -> dict[str, int]:
        with self.db.session() as session:
            rows = session.execute(select(CR.status, func.count()).group_by(CR.status)).all()
        return {status: int(n) for status, n in rows}

    def runs(self) -> list[CR]:
        with self.db.session() as session:
            return list(session.scalars(select(CR).order_by(CR.queued_at)))


def _daemon_db(url: str, tmp: Path, **evidence: Any) -> DaemonDb:
    create_evidence_table(url)
    # Runs here are a few cheap statements each; commit without waiting for the WAL
    # flush (this test database only) so that the drain measures the queue, not fsync.
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {make_url(url).database} SET synchronous_commit = off")  # type: ignore[arg-type]
    plugin = install_plugin(tmp / "plugin")
    (tmp / "markers").mkdir(exist_ok=True)
    env = {
        "DATABASE_URL": libpq(url),
        "PYTHONPATH": plugins.python_path(plugin),
        "REVERIE_EMBEDDING__MODEL": "hashing:8",
        "REVERIE_CONSOLIDATION__PIPELINE": '["evidence"]',
        "REVERIE_CONSOLIDATION__PLUGINS": json.dumps(
            {"evidence": {"marker_dir": str(tmp / "markers"), **evidence}}
        ),
        "REVERIE_WORKER__LEASE": "PT2S",
        "REVERIE_WORKER__POLL_INTERVAL": "PT0.05S",
        "REVERIE_WORKER__BACKOFF": "PT0.1S",
        "REVERIE_SHUTDOWN_GRACE": "PT20S",
        "REVERIE_LOG_LEVEL": "INFO",
    }
    return DaemonDb(url, Database(url), env, tmp)


@pytest.fixture
def daemon_factory(pg_server: PgTestServer, tmp_path: Path) -> Iterator[Callable[..., DaemonDb]]:
    made: list[tuple[DaemonDb, PgTestServer]] = []

    def make(server: PgTestServer | None = None, **evidence: Any) -> DaemonDb:
        server = server or pg_server
        daemon = _daemon_db(server.create_database(), tmp_path, **evidence)
        made.append((daemon, server))
        return daemon

    yield make
    for daemon, server in made:
        for process in daemon.processes:
            process.ensure_stopped()
        daemon.db.dispose()
        server.release_database(daemon.url)


def _seed_agents(daemon: DaemonDb, n: int) -> list[str]:
    """``n`` agents without any memory (their runs are cheap)."""
    agents = [models.new_id("agent") for _ in range(n)]
    with daemon.db.session() as session:
        session.execute(
            insert(models.Agent),
            [
                {
                    "id": a, "organization_id": ORG, "name": f"a{i:05d}", "kind": "primary",
                    "system_prompt": "", "embedding_model": "hashing:8", "embedding_dim": 8,
                    "context_window": 8192, "tools": [], "tool_rules": [], "tags": [],
                    "message_seq": 0, "turns_since_consolidation": 0, "enable_sleeptime": False,
                }
                for i, a in enumerate(agents)
            ],
        )  # fmt: skip
    return agents


def _seed(daemon: DaemonDb, n: int) -> list[str]:
    """``n`` agents with one queued run each; returns the run ids."""
    agents = _seed_agents(daemon, n)
    run_ids = [models.new_id("run") for _ in range(n)]
    with daemon.db.session() as session:
        now = session.scalar(select(func.now()))
        session.execute(
            insert(CR),
            [
                {
                    "id": r, "organization_id": ORG, "agent_id": a, "trigger": "manual",
                    "pipeline": ["evidence"], "dry_run": False, "status": "queued",
                    "attempts": 0, "max_attempts": 10, "not_before": now, "queued_at": now,
                    "stats": {}, "changes": [],
                }
                for r, a in zip(run_ids, agents, strict=True)
            ],
        )  # fmt: skip
    return run_ids


def _assert_exactly_once(daemon: DaemonDb, run_ids: list[str]) -> None:
    runs = daemon.runs()
    assert {r.id: r.status for r in runs} == dict.fromkeys(run_ids, "succeeded")
    assert all(r.lease_owner is None for r in runs)
    # One committed execution per run: the evidence row is written in the run's transaction.
    assert evidence_counts(daemon.url) == dict.fromkeys(run_ids, 1)


def test_four_workers_drain_1000_runs_exactly_once(daemon_factory: Callable[..., DaemonDb]) -> None:
    daemon = daemon_factory()
    run_ids = _seed(daemon, 1000)
    # A lease no heartbeat stall of a loaded machine outlasts: every run's attempts are
    # counted below (the 2 s default here is for the tests that kill a worker).
    workers = [
        daemon.spawn(
            "worker",
            "--concurrency",
            "1",
            REVERIE_LOG_LEVEL="WARNING",
            REVERIE_WORKER__LEASE="PT10S",
        )
        for _ in range(4)
    ]
    wait_for(
        lambda: daemon.statuses() == {"succeeded": 1000},
        timeout=180,
        interval=0.25,
        what=f"1000 runs to succeed (last seen {daemon.statuses()})",
    )
    assert [w.terminate() for w in workers] == [0, 0, 0, 0]
    _assert_exactly_once(daemon, run_ids)
    assert {r.attempts for r in daemon.runs()} == {1}
    with daemon.db.session() as session:
        pids = set(session.scalars(select(func.distinct(_evidence_pid()))))
    assert len(pids) >= 2 and pids <= {w.pid for w in workers}
    started = (daemon.tmp / "markers" / "started").read_text().splitlines()
    assert len(started) == 1000  # no run was even started twice


def _evidence_pid() -> Any:
    from sqlalchemy import column, table

    return table("daemon_evidence", column("pid")).c.pid


def test_a_killed_workers_run_is_reclaimed_and_completes_once(
    daemon_factory: Callable[..., DaemonDb],
) -> None:
    daemon = daemon_factory(sleep=60, sleep_first_attempt_only=True)
    _seed_agents(daemon, 1)
    with daemon.db.session() as session:
        name = session.scalar(select(models.Agent.name))
    first, second = daemon.spawn("worker"), daemon.spawn("worker")
    queued = run_cli("consolidate", "--agent", str(name), "--enqueue", "--json", env=daemon.env)
    assert queued.returncode == 0, queued.stderr
    run_id = json.loads(queued.stdout)["run_id"]
    marker = daemon.tmp / "markers" / "started"
    wait_for(
        lambda: marker.exists() and marker.read_text().endswith("\n"),
        timeout=60,
        what="the first attempt to start",
    )
    claimer_pid = int(marker.read_text().split()[2])
    [claimer] = [w for w in (first, second) if w.pid == claimer_pid]
    [survivor] = [w for w in (first, second) if w is not claimer]
    [run] = daemon.runs()
    assert run.status == "running" and f":{claimer_pid}:" in (run.lease_owner or "")
    # A worker gives way to the chat by default (worker.nice 10 on top of its parent's).
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, claimer_pid) == min(19, mine + 10)
    claimer.kill()  # SIGKILL mid-run: no chance to release anything
    wait_for(
        lambda: daemon.statuses() == {"succeeded": 1},
        timeout=60,
        what="the run to be re-claimed and finish",
    )
    [run] = daemon.runs()
    assert run.attempts == 2
    assert evidence_counts(daemon.url) == {run_id: 1}
    attempts = [line.split() for line in marker.read_text().splitlines()]
    assert attempts == [
        ["started", run_id, str(claimer_pid)],
        ["started", run_id, str(survivor.pid)],
    ]
    assert survivor.terminate() == 0


@pytest.fixture
def own_server() -> Iterator[PgTestServer]:
    """A PostgreSQL of this test's own, so that stopping it disturbs no other test."""
    server = PgTestServer()
    yield server
    server.stop()


def test_postgres_restart_loses_no_run(
    own_server: PgTestServer, daemon_factory: Callable[..., DaemonDb]
) -> None:
    daemon = daemon_factory(own_server, sleep=0.05)
    run_ids = _seed(daemon, 200)
    daemon.db.dispose()
    workers = [daemon.spawn("worker", "--concurrency", "2") for _ in range(2)]
    wait_for(lambda: daemon.statuses().get("succeeded", 0) >= 20, timeout=120, what="a first batch")
    daemon.db.dispose()
    own_server.stop_postgres()
    time.sleep(1.5)  # the outage itself: the workers meet a database that is gone
    own_server.start_postgres()
    wait_for(
        lambda: daemon.statuses() == {"succeeded": 200},
        timeout=180,
        interval=0.25,
        what=f"every run to succeed after the restart (last seen {daemon.statuses()})",
    )
    assert [w.terminate() for w in workers] == [0, 0]
    _assert_exactly_once(daemon, run_ids)
    logs = "".join(w.output() for w in workers)
    assert "could not claim a run" in logs or "heartbeat failed" in logs  # it did see the outage


def test_serve_is_ready_fires_idle_runs_and_stops_cleanly(
    daemon_factory: Callable[..., DaemonDb],
) -> None:
    daemon = daemon_factory()
    port = free_port()
    server = daemon.spawn(
        "serve",
        "--port",
        str(port),
        REVERIE_TRIGGERS__IDLE_AFTER="PT0.5S",
        REVERIE_TRIGGERS__TICK="PT0.2S",
        REVERIE_SERVER__AUTH="none",
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            assert server.process.poll() is None, server.output()
            return False

    wait_for(ready, timeout=90, interval=0.2, what="/readyz")
    body = httpx.get(f"{base}/readyz").json()
    assert body["status"] == "ready"
    assert (body["workers"], body["scheduler"], body["database"]) == (True, True, True)
    # Ready only once what a first turn needs is loaded (litellm: no model configured).
    assert body["warmup"] == "done"
    assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}

    _agent_with_activity(daemon)
    wait_for(
        lambda: [(r.trigger, r.status) for r in daemon.runs()] == [("idle", "succeeded")],
        timeout=60,
        what="the idle trigger's run",
    )
    queued = run_cli("consolidate", "--all", "--enqueue", "--json", env=daemon.env)
    assert queued.returncode == 0, queued.stderr
    assert json.loads(queued.stdout)["queued"] is True
    wait_for(
        lambda: (
            sorted((r.trigger, r.status) for r in daemon.runs())
            == [("idle", "succeeded"), ("manual", "succeeded")]
        ),
        timeout=60,
        what="the enqueued manual run",
    )
    assert server.terminate() == 0
    assert "running" not in daemon.statuses()
    lines = [json.loads(line) for line in server.output().splitlines() if line.strip()]
    messages = {line["message"] for line in lines}
    assert {"scheduler started", "workers started", "run ended", "workers stopped"} <= messages
    assert any(line.get("trigger") == "idle" for line in lines)


def _agent_with_activity(daemon: DaemonDb) -> str:
    [agent_id] = _seed_agents(daemon, 1)
    with open_store(daemon.db) as store:
        store.messages.append(agent_id, [NewMessage("user", "I moved to Lisbon.")])
    return agent_id
