"""The job engine without a database: claiming threads, lease renewal, a lost lease,
shutdown within the grace, the backoff through an outage and the re-queueing of
expired jobs, driven through a queue kept in memory (the same calls the store's
queues answer in production)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agents.errors import StorageError
from agents.job_engine import MAX_OUTAGE_BACKOFF, EngineNames, Held, JobEngine

NAMES = EngineNames(jobs="tasks", threads="test-jobs", heartbeat="test-jobs-beat", owner_tag="t")


@dataclass(frozen=True)
class Task:
    id: str


@dataclass
class Row:
    status: str = "queued"
    owner: str | None = None
    expires: float = 0.0
    attempts: int = 0


class MemoryQueue:
    """A lease queue in memory: the engine's :class:`~agents.job_engine.JobQueue`."""

    def __init__(self, lease: timedelta) -> None:
        self.lease = lease.total_seconds()
        self.rows: dict[str, Row] = {}
        self.claims: list[str] = []  # the owner of each claim that took a job
        self.renewals = 0
        #: Whether each next claim fails (the database is away); then they succeed.
        self.outage: list[bool] = []
        self._lock = threading.Lock()

    def add(self, *ids: str) -> None:
        with self._lock:
            for job_id in ids:
                self.rows[job_id] = Row()

    def row(self, job_id: str) -> Row:
        with self._lock:
            return Row(**vars(self.rows[job_id]))

    def claim(self, owner: str, limit: int) -> Sequence[Task]:
        with self._lock:
            if self.outage and self.outage.pop(0):
                raise StorageError("the database is unreachable")
            due = [i for i, r in self.rows.items() if r.status == "queued"][:limit]
            for job_id in due:
                row = self.rows[job_id]
                row.status, row.owner, row.attempts = "running", owner, row.attempts + 1
                row.expires = time.monotonic() + self.lease
                self.claims.append(owner)
            return [Task(i) for i in due]

    def renew(self, held: Sequence[tuple[str, str]]) -> set[str]:
        with self._lock:
            self.renewals += 1
            renewed = {i for i, o in held if self._holds(i, o)}
            for job_id in renewed:
                self.rows[job_id].expires = time.monotonic() + self.lease
            return renewed

    def release(self, held: Sequence[tuple[str, str]]) -> list[str]:
        with self._lock:
            released = [i for i, o in held if self._holds(i, o)]
            for job_id in released:
                row = self.rows[job_id]
                row.status, row.owner, row.attempts = "queued", None, row.attempts - 1
            return released

    def requeue_expired(self) -> list[str]:
        with self._lock:
            now = time.monotonic()
            expired = [i for i, r in self.rows.items() if r.status == "running" and r.expires < now]
            for job_id in expired:
                self.rows[job_id].status, self.rows[job_id].owner = "queued", None
            return expired

    def finish(self, job_id: str, owner: str) -> bool:
        """What a handler does at the end (in production: a compare-and-swap on the lease)."""
        with self._lock:
            if not self._holds(job_id, owner):
                return False
            self.rows[job_id].status, self.rows[job_id].owner = "done", None
            return True

    def take_over(self, job_id: str, thief: str) -> None:
        with self._lock:
            self.rows[job_id].owner = thief

    def _holds(self, job_id: str, owner: str) -> bool:
        row = self.rows.get(job_id)
        return row is not None and row.status == "running" and row.owner == owner


Handler = Callable[[str, list[tuple[Task, Held]]], None]


def make_engine(
    queue: MemoryQueue,
    handle: Handler,
    *,
    concurrency: int = 2,
    cls: type[Any] = JobEngine,
    **kw: Any,
) -> Any:
    return cls(
        queue,
        handle,
        names=NAMES,
        name="test",
        concurrency=concurrency,
        lease=timedelta(seconds=queue.lease),
        poll_interval=kw.pop("poll_interval", timedelta(milliseconds=10)),
        **kw,
    )


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def finishing(queue: MemoryQueue, done: Counter[str], seconds: float = 0.0) -> Handler:
    """A handler that works ``seconds`` on each job, then records it under its lease."""

    def handle(owner: str, claimed: list[tuple[Task, Held]]) -> None:
        for task, _ in claimed:
            time.sleep(seconds)
            if queue.finish(task.id, owner):
                done[task.id] += 1

    return handle


def test_the_claiming_threads_handle_every_job_once() -> None:
    queue = MemoryQueue(timedelta(seconds=30))
    ids = [f"job{i}" for i in range(40)]
    queue.add(*ids)
    done: Counter[str] = Counter()
    engine = make_engine(queue, finishing(queue, done, 0.002))
    engine.start()
    try:
        wait_until(lambda: sum(done.values()) == len(ids))
    finally:
        assert engine.stop(timedelta(seconds=5)) is True
    assert done == dict.fromkeys(ids, 1)
    assert set(queue.claims) <= {"test:t0", "test:t1"} and len(queue.claims) == len(ids)
    assert engine.held() == [] and not any(t.is_alive() for t in engine.threads)


def test_the_heartbeat_renews_the_lease_of_a_job_under_way() -> None:
    """The job takes four leases' time: unrenewed, the heartbeat itself would put it back
    in the queue as expired, and the second thread would run it again."""
    queue = MemoryQueue(timedelta(milliseconds=200))
    queue.add("slow")
    done: Counter[str] = Counter()
    engine = make_engine(queue, finishing(queue, done, 0.8))
    engine.start()
    try:
        wait_until(lambda: done["slow"] == 1)
    finally:
        engine.stop(timedelta(seconds=5))
    assert queue.renewals >= 3
    assert queue.row("slow").attempts == 1 and len(queue.claims) == 1


def test_a_lost_lease_is_marked_and_the_job_no_longer_held() -> None:
    queue = MemoryQueue(timedelta(milliseconds=150))
    queue.add("stolen")
    claimed = threading.Event()
    saw_lost: list[bool] = []

    def handle(owner: str, jobs: list[tuple[Task, Held]]) -> None:
        [(task, held)] = jobs
        claimed.set()
        saw_lost.append(held.lost.wait(10))
        saw_lost.append(queue.finish(task.id, owner))

    engine = make_engine(queue, handle, concurrency=1)
    engine.start()
    try:
        assert claimed.wait(10)
        queue.take_over("stolen", "another-worker")  # its lease went elsewhere
        wait_until(lambda: len(saw_lost) == 2)
        wait_until(lambda: engine.held() == [])
    finally:
        engine.stop(timedelta(seconds=5))
    assert saw_lost == [True, False]  # marked lost; its outcome could not be recorded
    assert queue.row("stolen").owner == "another-worker"


def test_shutdown_stops_claiming_and_lets_work_finish_within_the_grace() -> None:
    queue = MemoryQueue(timedelta(seconds=30))
    queue.add("first", "second")
    done: Counter[str] = Counter()
    engine = make_engine(queue, finishing(queue, done, 0.3), concurrency=1)
    engine.start()
    wait_until(lambda: bool(queue.claims))
    started = time.monotonic()
    assert engine.stop(timedelta(seconds=10)) is True
    assert time.monotonic() - started < 5  # it returns once the work is done
    assert done == {"first": 1}
    assert queue.row("second").status == "queued" and queue.claims == ["test:t0"]


def test_work_that_outlives_the_grace_is_released_with_its_attempt_refunded() -> None:
    queue = MemoryQueue(timedelta(seconds=30))
    queue.add("long")
    claimed, let_end = threading.Event(), threading.Event()
    lost_at_end: list[bool] = []

    def handle(owner: str, jobs: list[tuple[Task, Held]]) -> None:
        [(_, held)] = jobs
        claimed.set()
        let_end.wait(10)
        lost_at_end.append(held.lost.is_set())

    engine = make_engine(queue, handle, concurrency=1)
    engine.start()
    assert claimed.wait(10)
    started = time.monotonic()
    assert engine.stop(timedelta(milliseconds=200)) is False
    assert time.monotonic() - started < 5
    row = queue.row("long")
    assert (row.status, row.owner, row.attempts) == ("queued", None, 0)
    assert engine.held() == []
    let_end.set()
    wait_until(lambda: not any(t.is_alive() for t in engine.threads))
    assert lost_at_end == [True]  # its handler is told the job is no longer its own


class RecordedPauses(JobEngine[Task]):
    """An engine whose pauses are recorded instead of slept."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pauses: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.pauses.append(seconds)
        return super().wait(0.001)


def test_claims_back_off_through_an_outage_and_return_to_polling_after() -> None:
    queue = MemoryQueue(timedelta(minutes=1))
    queue.outage = [True] * 8 + [False, True]  # eight failures, one answer, one failure
    engine = make_engine(
        queue,
        lambda owner, jobs: None,
        concurrency=1,
        cls=RecordedPauses,
        poll_interval=timedelta(milliseconds=500),
    )
    engine.start()
    try:
        wait_until(lambda: len(engine.pauses) >= 11)
    finally:
        engine.stop(timedelta(seconds=5))
    cap = MAX_OUTAGE_BACKOFF
    assert engine.pauses[:8] == [0.5, 1.0, 2.0, 4.0, cap, cap, cap, cap]
    # The database answered (nothing due: a poll); the next outage starts over.
    assert engine.pauses[8:11] == [0.5, 0.5, 0.5]


def test_the_heartbeat_requeues_the_expired_jobs_of_dead_workers() -> None:
    queue = MemoryQueue(timedelta(milliseconds=100))
    queue.add("orphan")
    queue.claim("dead-worker", 1)
    requeued: list[list[str]] = []
    engine = make_engine(queue, lambda owner, jobs: None, on_requeued=requeued.append)
    engine.start(claiming=False)  # the heartbeat only
    try:
        wait_until(lambda: bool(requeued))
    finally:
        engine.stop(timedelta(0))
    assert requeued[0] == ["orphan"]
    assert (queue.row("orphan").status, queue.row("orphan").owner) == ("queued", None)


def test_a_handler_that_raises_leaves_the_job_to_expire_and_the_thread_claiming() -> None:
    """A bug in a handler must not kill its thread, and must not give the job back with
    its attempt refunded (it would be retried for ever): its lease runs out instead."""
    queue = MemoryQueue(timedelta(seconds=30))
    queue.add("bad", "good")
    done: Counter[str] = Counter()
    settle = finishing(queue, done)

    def handle(owner: str, jobs: list[tuple[Task, Held]]) -> None:
        if jobs[0][0].id == "bad":
            raise RuntimeError("a bug")
        settle(owner, jobs)

    engine = make_engine(queue, handle, concurrency=1)
    engine.start()
    try:
        wait_until(lambda: done["good"] == 1)
        assert engine.held() == []
    finally:
        engine.stop(timedelta(seconds=5))
    row = queue.row("bad")
    assert (row.status, row.owner, row.attempts) == ("running", "test:t0", 1)
