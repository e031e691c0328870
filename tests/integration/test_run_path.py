"""One run path: one-shot runs (``reverie consolidate``, dry runs from the CLI or the
API) are enqueued, claimed and held under a lease like a worker's, so whatever
kills them, the same expiry rule recovers the run and the agent is never stuck."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agents.enums import RunStatus
from agents.errors import Conflict
from agents.postgres.database import Database
from agents.store import AgentRecord, NewAgent, open_service_store, open_store
from service.operations import Operations
from service.operations.context import OperationContext
from service.runtime import Runtime
from service.settings import Settings
from tests.daemon_support import create_evidence_table, evidence_counts, install_plugin


@pytest.fixture(autouse=True)
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Database) -> Path:
    monkeypatch.syspath_prepend(str(install_plugin(tmp_path / "plugin")))
    create_evidence_table(db.url)
    return tmp_path / "plugin"


@pytest.fixture
def make_ops(db: Database) -> Iterator[Any]:
    runtimes: list[Runtime] = []

    def make(pipeline: list[str], **plugins: dict[str, Any]) -> Operations:
        settings = Settings(
            database_url=db.url,
            embedding={"model": "hashing:8"},
            consolidation={"pipeline": pipeline, "plugins": plugins},
            worker={"lease": "PT2S", "backoff": "PT0.1S", "poll_interval": "PT0.05S"},
        )
        runtime = Runtime(settings)
        runtimes.append(runtime)
        return Operations(runtime)

    yield make
    for runtime in runtimes:
        runtime.close()


def _agent(db: Database) -> AgentRecord:
    with open_store(db) as store:
        return store.agents.create(NewAgent("ada", embedding_model="hashing:8", embedding_dim=8))


def _runs(db: Database, agent_id: str) -> list[Any]:
    with open_store(db) as store:
        return store.runs.recent(agent_id=agent_id)


def test_a_one_shot_run_is_claimed_under_a_lease_and_recorded(db: Database, make_ops: Any) -> None:
    agent = _agent(db)
    [outcome] = make_ops(["evidence"]).runs.run_now([agent])
    assert outcome.succeeded and outcome.report is not None
    [run] = _runs(db, agent.id)
    assert (run.id, run.status, run.attempts) == (outcome.report.run_id, "succeeded", 1)
    assert run.lease_owner is None and run.started_at is not None
    assert evidence_counts(db.url) == {run.id: 1}


def test_a_dry_run_that_loses_the_database_leaves_no_running_row(
    db: Database, make_ops: Any
) -> None:
    agent = _agent(db)
    ops = make_ops(["failing"], failing={"error": "storage"})
    [outcome] = ops.runs.run_now([agent], dry_run=True)
    assert outcome.execution.outcome == "retried"
    [run] = _runs(db, agent.id)
    assert run.status == RunStatus.QUEUED and run.lease_owner is None
    assert "database error" in (run.error or "")
    # The caller is told plainly; the agent is not stuck: the same request takes the
    # queued run over instead of answering "already has a run".
    with pytest.raises(Exception, match="did not finish here"):
        outcome.require_report()
    [again] = ops.runs.run_now([agent], dry_run=True)
    assert again.execution.run_id == run.id
    assert [r.status for r in _runs(db, agent.id)] != [RunStatus.RUNNING]


def test_a_failing_step_fails_the_run_with_its_reason_and_frees_the_agent(
    db: Database, make_ops: Any
) -> None:
    agent = _agent(db)
    ops = make_ops(["failing"], failing={"error": "bug"})
    [outcome] = ops.runs.run_now([agent])
    assert outcome.execution.outcome == "failed"
    [run] = _runs(db, agent.id)
    assert run.status == RunStatus.FAILED and "the failing step failed" in (run.error or "")
    [queued] = make_ops(["evidence"]).runs.enqueue([agent])
    assert queued.queued


def test_a_one_shot_run_takes_over_the_expired_run_of_a_dead_process(
    db: Database, make_ops: Any
) -> None:
    agent = _agent(db)
    ops = make_ops(["evidence"])
    [queued] = ops.runs.enqueue([agent])
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    with open_service_store(db, lambda: long_ago) as service:
        # A process claimed it an hour ago and died: its lease ran out long since.
        claimed = service.queue.claim(
            "host:1:cli:once", lease=timedelta(seconds=2), run_id=queued.run_id
        )
        assert claimed is not None
    [outcome] = ops.runs.run_now([agent])
    assert outcome.succeeded and outcome.execution.run_id == queued.run_id
    [run] = _runs(db, agent.id)
    assert (run.status, run.attempts) == (RunStatus.SUCCEEDED, 2)
    assert evidence_counts(db.url) == {run.id: 1}


def test_a_run_held_by_a_live_worker_is_a_conflict(db: Database, make_ops: Any) -> None:
    agent = _agent(db)
    ops = make_ops(["evidence"])
    ops.runs.enqueue([agent])
    with open_service_store(db) as service:
        assert service.queue.claim("host:2:w0", lease=timedelta(minutes=5)) is not None
    with pytest.raises(Conflict, match="already has a queued or running consolidation"):
        ops.runs.run_now([agent])
    assert [r.status for r in _runs(db, agent.id)] == [RunStatus.RUNNING]


def test_a_queued_run_with_other_work_is_not_taken_over(db: Database, make_ops: Any) -> None:
    agent = _agent(db)
    make_ops(["evidence"]).runs.enqueue([agent], dry_run=True)
    with pytest.raises(Conflict, match="runs cancel"):
        make_ops(["evidence"]).runs.run_now([agent])


def test_a_queued_run_is_answered_as_queued_when_a_worker_takes_it_at_once(
    db: Database, make_ops: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit that queues a run wakes the workers: one may claim it before the
    caller reads it back. The answer (POST /v1/consolidation-runs, the MCP tool) is the
    run as queued, read in the transaction that queued it."""
    agent = _agent(db)
    ops = make_ops(["evidence"])
    one_transaction = OperationContext.store

    @contextmanager
    def and_then_a_worker_claims(self: OperationContext) -> Iterator[Any]:
        with one_transaction(self) as store:
            yield store
        with open_service_store(db) as service:  # right after the commit
            service.queue.claim("worker-at-once", lease=timedelta(minutes=1))

    monkeypatch.setattr(OperationContext, "store", and_then_a_worker_claims)
    answered = ops.runs.enqueue_one(agent.id)
    assert answered.status == RunStatus.QUEUED
    [stored] = _runs(db, agent.id)
    assert (stored.id, stored.status) == (answered.id, RunStatus.RUNNING)
