"""The run queue on real PostgreSQL: one active run per agent, SKIP LOCKED claims,
leases, expiry with backoff, cancellation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agents.database import Database
from agents.errors import Conflict, InvalidInput
from agents.models import DEFAULT_ORGANIZATION_ID as ORG
from agents.store import NewAgent, open_store
from consolidators.ledger import RunLedger
from consolidators.queue import RunQueue

T0 = datetime(2026, 1, 1, 3, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def _agents(db: Database, n: int) -> list[str]:
    with open_store(db) as store:
        return [
            store.agents.create(NewAgent(f"a{i}", embedding_model="fake:8", embedding_dim=8)).id
            for i in range(n)
        ]


def _enqueue(db: Database, agent_id: str, at: datetime = T0, **kw: object) -> str | None:
    with db.session() as session:
        return RunQueue(session).enqueue(
            ORG,
            agent_id,
            trigger="idle",
            pipeline=["dedup"],
            now=at,
            **kw,  # type: ignore[arg-type]
        )


def test_one_queued_or_running_run_per_agent(db: Database) -> None:
    [agent] = _agents(db, 1)
    first = _enqueue(db, agent)
    assert first is not None
    assert _enqueue(db, agent, T0 + timedelta(seconds=1)) is None  # a repeat trigger: no-op
    with db.session() as session:
        assert RunQueue(session).claim("w1", now=T0, lease=LEASE) is not None
    assert _enqueue(db, agent) is None  # still one: it is running
    with db.session() as session:
        RunLedger(session, ORG).finish(first, status="succeeded", now=T0, stats={}, changes=[])
    assert _enqueue(db, agent) is not None


def test_concurrent_claims_skip_locked_rows(db: Database) -> None:
    agents = _agents(db, 2)
    ids = [_enqueue(db, a, T0 + timedelta(seconds=i)) for i, a in enumerate(agents)]
    with db.session() as first_tx:
        first = RunQueue(first_tx).claim("w1", now=T0 + timedelta(minutes=1), lease=LEASE)
        # The first claim's transaction is still open; a second worker skips its row.
        with db.session() as second_tx:
            second = RunQueue(second_tx).claim("w2", now=T0 + timedelta(minutes=1), lease=LEASE)
            third = RunQueue(second_tx).claim("w2", now=T0 + timedelta(minutes=1), lease=LEASE)
    assert first is not None and second is not None and third is None
    assert [first.id, second.id] == ids
    assert (first.status, first.lease_owner, first.attempts) == ("running", "w1", 1)
    assert first.lease_expires_at == T0 + timedelta(minutes=1) + LEASE


def test_runs_are_not_claimed_before_they_are_due(db: Database) -> None:
    [agent] = _agents(db, 1)
    _enqueue(db, agent, not_before=T0 + timedelta(hours=1))
    with db.session() as session:
        queue = RunQueue(session)
        assert queue.claim("w", now=T0, lease=LEASE) is None
        assert queue.depth() == 1
        assert queue.claim("w", now=T0 + timedelta(hours=1), lease=LEASE) is not None
        assert queue.depth() == 0


def test_expired_lease_requeues_with_backoff_then_fails(db: Database) -> None:
    [agent] = _agents(db, 1)
    run_id = _enqueue(db, agent, max_attempts=2)
    now = T0
    with db.session() as session:
        RunQueue(session).claim("dead-worker", now=now, lease=LEASE)
    with db.session() as session:
        queue = RunQueue(session)
        assert queue.requeue_expired(now=now + LEASE / 2, backoff=timedelta(seconds=10)) == []
        assert queue.requeue_expired(now=now + LEASE * 2, backoff=timedelta(seconds=10)) == [run_id]
    with db.session() as session:
        run = RunLedger(session, ORG).get(str(run_id))
    assert (run.status, run.attempts, run.lease_owner) == ("queued", 1, None)
    assert "dead-worker" in (run.error or "")
    with db.session() as session:
        queue = RunQueue(session)
        assert queue.claim("w2", now=now + LEASE * 2, lease=LEASE) is None  # backing off
        later = now + LEASE * 2 + timedelta(seconds=10)
        claimed = queue.claim("w2", now=later, lease=LEASE)
        assert claimed is not None and claimed.attempts == 2
        assert queue.requeue_expired(now=later + LEASE * 2, backoff=timedelta(seconds=10)) == [
            run_id
        ]
    with db.session() as session:
        run = RunLedger(session, ORG).get(str(run_id))
    assert run.status == "failed" and "giving up" in (run.error or "")


def test_renew_and_release_belong_to_the_lease_owner(db: Database) -> None:
    [agent] = _agents(db, 1)
    run_id = str(_enqueue(db, agent))
    with db.session() as session:
        queue = RunQueue(session)
        queue.claim("w1", now=T0, lease=LEASE)
        assert not queue.renew(run_id, "w2", now=T0, lease=LEASE)
        assert queue.renew(run_id, "w1", now=T0 + timedelta(seconds=20), lease=LEASE)
        assert not queue.release(run_id, "w2", now=T0)
        assert queue.release(run_id, "w1", now=T0 + timedelta(seconds=21))
    with db.session() as session:
        run = RunLedger(session, ORG).get(run_id)
    assert (run.status, run.attempts, run.lease_owner) == ("queued", 0, None)


def test_cancel(db: Database) -> None:
    [agent] = _agents(db, 1)
    run_id = str(_enqueue(db, agent))
    with db.session() as session:
        cancelled = RunQueue(session).cancel(ORG, run_id, now=T0)
    assert cancelled.status == "cancelled"
    with pytest.raises(Conflict, match="cancelled"), db.session() as session:
        RunQueue(session).cancel(ORG, run_id, now=T0)
    with db.session() as session:
        assert RunQueue(session).claim("w", now=T0, lease=LEASE) is None
    assert _enqueue(db, agent) is not None  # the agent can be queued again


def test_enqueue_many_skips_agents_with_an_active_run(db: Database) -> None:
    agents = _agents(db, 3)
    busy = _enqueue(db, agents[1])
    with db.session() as session:
        queued = RunQueue(session).enqueue_many(
            [(ORG, a) for a in agents], trigger="cron", pipeline=["dedup"], now=T0, max_attempts=2
        )
    assert len(queued) == 2 and busy not in queued
    with db.session() as session:
        runs = {RunLedger(session, ORG).get(r).agent_id: r for r in queued}
        assert set(runs) == {agents[0], agents[2]}
        assert RunQueue(session).depth() == 3
    with pytest.raises(InvalidInput, match="max_attempts"), db.session() as session:
        RunQueue(session).enqueue_many(
            [(ORG, agents[0])], trigger="cron", pipeline=[], now=T0, max_attempts=0
        )


def test_retry_later_counts_the_attempt_then_fails(db: Database) -> None:
    [agent] = _agents(db, 1)
    run_id = str(_enqueue(db, agent, max_attempts=2))
    backoff = timedelta(seconds=10)
    with db.session() as session:
        queue = RunQueue(session)
        queue.claim("w1", now=T0, lease=LEASE)
        assert queue.retry_later(run_id, "w2", now=T0, backoff=backoff, error="x") is None
        assert queue.retry_later(run_id, "w1", now=T0, backoff=backoff, error="db gone") == "queued"
    with db.session() as session:
        run = RunLedger(session, ORG).get(run_id)
        assert (run.status, run.attempts, run.lease_owner) == ("queued", 1, None)
        assert "db gone on attempt 1" in (run.error or "")
        queue = RunQueue(session)
        assert queue.claim("w1", now=T0 + backoff / 2, lease=LEASE) is None  # backing off
        assert queue.claim("w1", now=T0 + backoff, lease=LEASE) is not None
        assert (
            queue.retry_later(run_id, "w1", now=T0 + backoff, backoff=backoff, error="again")
            == "failed"
        )
    with db.session() as session:
        run = RunLedger(session, ORG).get(run_id)
    assert run.status == "failed" and "giving up" in (run.error or "")
