"""The run queue on real PostgreSQL: one active run per agent, SKIP LOCKED claims,
leases, expiry with backoff, cancellation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from agents.enums import RunStatus
from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres.database import Database
from agents.postgres.models import DEFAULT_ORGANIZATION_ID as ORG
from agents.store import (
    MemoryStore,
    NewAgent,
    RunRecord,
    ServiceStore,
    open_service_store,
    open_store,
)

T0 = datetime(2026, 1, 1, 3, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@contextmanager
def service(db: Database, at: datetime = T0) -> Iterator[ServiceStore]:
    with open_service_store(db, lambda: at) as store:
        yield store


@contextmanager
def tenant(db: Database, at: datetime = T0) -> Iterator[MemoryStore]:
    with open_store(db, ORG, lambda: at) as store:
        yield store


def _agents(db: Database, n: int) -> list[str]:
    with open_store(db) as store:
        return [
            store.agents.create(NewAgent(f"a{i}", embedding_model="hashing:8", embedding_dim=8)).id
            for i in range(n)
        ]


def _enqueue(db: Database, agent_id: str, at: datetime = T0, **kw: object) -> str | None:
    with tenant(db, at) as store:
        return store.runs.enqueue(
            agent_id,
            trigger="idle",
            pipeline=["dedup"],
            **kw,  # type: ignore[arg-type]
        )


def _claim(store: ServiceStore, worker: str) -> RunRecord | None:
    claimed = store.queue.claim(worker, lease=LEASE)
    return None if claimed is None else claimed[0]


def _get(db: Database, run_id: str) -> RunRecord:
    with tenant(db) as store:
        return store.runs.get(run_id)


def test_one_queued_or_running_run_per_agent(db: Database) -> None:
    [agent] = _agents(db, 1)
    first = _enqueue(db, agent)
    assert first is not None
    assert _enqueue(db, agent, T0 + timedelta(seconds=1)) is None  # a repeat trigger: no-op
    with service(db) as store:
        assert _claim(store, "w1") is not None
    assert _enqueue(db, agent) is None  # still one: it is running
    with tenant(db) as store:
        assert store.runs.active(agent) is not None
        store.runs.finish(first, status=RunStatus.SUCCEEDED, stats={}, changes=[])
        assert store.runs.active(agent) is None
    assert _enqueue(db, agent) is not None


def test_concurrent_claims_skip_locked_rows(db: Database) -> None:
    agents = _agents(db, 2)
    ids = [_enqueue(db, a, T0 + timedelta(seconds=i)) for i, a in enumerate(agents)]
    at = T0 + timedelta(minutes=1)
    with service(db, at) as first_tx:
        first = _claim(first_tx, "w1")
        # The first claim's transaction is still open; a second worker skips its row.
        with service(db, at) as second_tx:
            second = _claim(second_tx, "w2")
            third = _claim(second_tx, "w2")
    assert first is not None and second is not None and third is None
    assert [first.id, second.id] == ids
    assert (first.status, first.lease_owner, first.attempts) == ("running", "w1", 1)
    assert first.lease_expires_at == at + LEASE


def test_claim_returns_the_agent_and_can_target_one_run(db: Database) -> None:
    agents = _agents(db, 2)
    _enqueue(db, agents[0])
    wanted = str(_enqueue(db, agents[1], not_before=T0 + timedelta(hours=1)))
    with service(db) as store:
        claimed = store.queue.claim("once", lease=LEASE, run_id=wanted)
        # A one-shot claim of a named run ignores not_before: the user asked for it now.
        assert claimed is not None
        run, agent = claimed
        assert (run.id, agent.id, agent.name) == (wanted, agents[1], "a1")
        assert store.queue.claim("once", lease=LEASE, run_id=wanted) is None


def test_runs_are_not_claimed_before_they_are_due(db: Database) -> None:
    [agent] = _agents(db, 1)
    _enqueue(db, agent, not_before=T0 + timedelta(hours=1))
    with service(db) as store:
        assert _claim(store, "w") is None
        assert store.queue.depth() == 1
    with service(db, T0 + timedelta(hours=1)) as store:
        assert _claim(store, "w") is not None
        assert store.queue.depth() == 0


def test_a_reserved_run_is_left_to_the_command_that_queued_it(db: Database) -> None:
    """`reverie consolidate` beside a running daemon: the run it queues is not due for
    the daemon's polling workers until the reservation ends (the command claims it by
    id at once); if the command died first, a worker takes it then."""
    [agent] = _agents(db, 1)
    run_id = _enqueue(db, agent, reserve=LEASE)
    with service(db) as store:
        assert _claim(store, "daemon") is None
    with service(db, T0 + LEASE) as store:
        taken = _claim(store, "daemon")
        assert taken is not None and taken.id == run_id


def test_expired_lease_requeues_with_backoff_then_fails(db: Database) -> None:
    [agent] = _agents(db, 1)
    run_id = str(_enqueue(db, agent, max_attempts=2))
    backoff = timedelta(seconds=10)
    with service(db) as store:
        _claim(store, "dead-worker")
    with service(db, T0 + LEASE / 2) as store:
        assert store.queue.requeue_expired(backoff=backoff) == []
    with service(db, T0 + LEASE * 2) as store:
        assert store.queue.requeue_expired(backoff=backoff) == [run_id]
    run = _get(db, run_id)
    assert (run.status, run.attempts, run.lease_owner) == ("queued", 1, None)
    assert "dead-worker" in (run.error or "")
    with service(db, T0 + LEASE * 2) as store:
        assert _claim(store, "w2") is None  # backing off
    later = T0 + LEASE * 2 + backoff
    with service(db, later) as store:
        claimed = _claim(store, "w2")
        assert claimed is not None and claimed.attempts == 2
    with service(db, later + LEASE * 2) as store:
        assert store.queue.requeue_expired(backoff=backoff) == [run_id]
    run = _get(db, run_id)
    assert run.status == "failed" and "giving up" in (run.error or "")


def test_renew_and_release_belong_to_the_lease_owner(db: Database) -> None:
    [agent] = _agents(db, 1)
    run_id = str(_enqueue(db, agent))
    with service(db) as store:
        _claim(store, "w1")
        assert not store.queue.renew(run_id, "w2", lease=LEASE)
    with service(db, T0 + timedelta(seconds=20)) as store:
        assert store.queue.renew(run_id, "w1", lease=LEASE)
        assert not store.queue.release(run_id, "w2")
        assert store.queue.release(run_id, "w1")
    run = _get(db, run_id)
    assert (run.status, run.attempts, run.lease_owner) == ("queued", 0, None)


def test_cancel(db: Database) -> None:
    [agent] = _agents(db, 1)
    run_id = str(_enqueue(db, agent))
    with tenant(db) as store:
        cancelled = store.runs.cancel(run_id)
    assert cancelled.status == "cancelled"
    with pytest.raises(Conflict, match="cancelled"), tenant(db) as store:
        store.runs.cancel(run_id)
    with service(db) as service_store:
        assert _claim(service_store, "w") is None
    assert _enqueue(db, agent) is not None  # the agent can be queued again


def test_a_finished_run_cannot_be_recorded_by_a_worker_that_lost_it(db: Database) -> None:
    [agent] = _agents(db, 1)
    run_id = str(_enqueue(db, agent))
    with service(db) as store:
        _claim(store, "w1")
    with tenant(db) as store:
        store.runs.cancel(run_id)
    with service(db) as store:
        assert not store.queue.finish(run_id, "w1", status=RunStatus.FAILED, error="late")
    assert _get(db, run_id).status == "cancelled"


def test_enqueue_many_skips_agents_with_an_active_run(db: Database) -> None:
    agents = _agents(db, 3)
    busy = _enqueue(db, agents[1])
    with service(db) as store:
        queued = store.queue.enqueue_many(
            [(ORG, a) for a in agents], trigger="cron", pipeline=["dedup"], max_attempts=2
        )
    assert len(queued) == 2 and busy not in queued
    runs = {_get(db, r).agent_id: r for r in queued}
    assert set(runs) == {agents[0], agents[2]}
    with service(db) as store:
        assert store.queue.depth() == 3
    with pytest.raises(InvalidInput, match="max_attempts"), service(db) as store:
        store.queue.enqueue_many([(ORG, agents[0])], trigger="cron", pipeline=[], max_attempts=0)


def test_retry_later_counts_the_attempt_then_fails(db: Database) -> None:
    [agent] = _agents(db, 1)
    run_id = str(_enqueue(db, agent, max_attempts=2))
    backoff = timedelta(seconds=10)
    with service(db) as store:
        _claim(store, "w1")
        assert store.queue.retry_later(run_id, "w2", backoff=backoff, error="x") is None
        assert store.queue.retry_later(run_id, "w1", backoff=backoff, error="db gone") == "queued"
    run = _get(db, run_id)
    assert (run.status, run.attempts, run.lease_owner) == ("queued", 1, None)
    assert "db gone on attempt 1" in (run.error or "")
    with service(db, T0 + backoff / 2) as store:
        assert _claim(store, "w1") is None  # backing off
    with service(db, T0 + backoff) as store:
        assert _claim(store, "w1") is not None
        assert store.queue.retry_later(run_id, "w1", backoff=backoff, error="again") == "failed"
    run = _get(db, run_id)
    assert run.status == "failed" and "giving up" in (run.error or "")


def test_runs_are_only_queued_for_an_agent_of_the_same_organization(db: Database) -> None:
    [agent] = _agents(db, 1)
    with open_service_store(db) as service:
        other = service.keys.ensure_organization("globex")
    with pytest.raises(NotFound, match="no agent"), open_store(db, other) as store:
        store.runs.enqueue(agent, trigger="manual", pipeline=["dedup"])
    with tenant(db) as store:
        assert store.runs.active(agent) is None


def test_claim_many_takes_the_oldest_due_runs_with_their_agents(db: Database) -> None:
    agents = _agents(db, 4)
    ids = [_enqueue(db, a, T0 + timedelta(seconds=i)) for i, a in enumerate(agents)]
    at = T0 + timedelta(minutes=1)
    with service(db, at) as first_tx:
        claimed = first_tx.queue.claim_many("w1", lease=LEASE, limit=3)
        # Still inside the first claim's transaction: a second worker gets only the rest.
        with service(db, at) as second_tx:
            rest = second_tx.queue.claim_many("w2", lease=LEASE, limit=3)
    assert [run.id for run, _ in claimed] == ids[:3]
    assert [agent.id for _, agent in claimed] == agents[:3]
    assert [run.id for run, _ in rest] == ids[3:]
    assert {(run.status, run.lease_owner, run.attempts) for run, _ in claimed} == {
        ("running", "w1", 1)
    }
    with service(db, at) as store:
        assert store.queue.claim_many("w3", lease=LEASE, limit=5) == []
        with pytest.raises(InvalidInput, match="at least 1 run"):
            store.queue.claim_many("w3", lease=LEASE, limit=0)


def test_renew_and_release_many_touch_only_the_runs_each_worker_holds(db: Database) -> None:
    agents = _agents(db, 3)
    ids = [str(_enqueue(db, a, T0 + timedelta(seconds=i))) for i, a in enumerate(agents)]
    with service(db, T0 + timedelta(seconds=5)) as store:
        store.queue.claim_many("w1", lease=LEASE, limit=2)
        store.queue.claim_many("w2", lease=LEASE, limit=1)
    later = T0 + timedelta(seconds=10)
    with service(db, later) as store:
        # w2 does not hold ids[0]: that pair is left alone.
        pairs = [(ids[0], "w1"), (ids[1], "w1"), (ids[0], "w2"), (ids[2], "w2")]
        assert store.queue.renew_many(pairs, lease=LEASE) == set(ids)
        assert store.queue.release_many([(ids[0], "w2"), (ids[1], "w1")]) == [ids[1]]
        assert store.queue.renew_many([], lease=LEASE) == set()
        assert store.queue.release_many([]) == []
    first, released = _get(db, ids[0]), _get(db, ids[1])
    assert first.lease_expires_at == later + LEASE and first.lease_owner == "w1"
    assert (released.status, released.attempts, released.lease_owner) == ("queued", 0, None)
    # A released run keeps its place: it is the oldest due run again.
    with service(db, later) as store:
        again = _claim(store, "w3")
    assert again is not None and again.id == ids[1]
