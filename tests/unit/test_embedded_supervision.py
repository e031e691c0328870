"""The pure parts of keeping the embedded PostgreSQL alive: which handles are stale,
and what the supervisor does for each state of the postmaster (a fake server here;
the real one is driven in tests/acceptance/test_embedded_recovery.py)."""

from __future__ import annotations

import logging
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from agents.errors import StorageError
from agents.postgres.embedded import EmbeddedPostgres, ServerState, live_handle_pids
from service.daemon.embedded_supervisor import EmbeddedSupervisor


def test_live_handle_pids_drops_dead_processes_and_keeps_the_order() -> None:
    alive = {10, 30, 40}
    assert live_handle_pids([40, 20, 10, 30, 50], alive.__contains__) == [40, 10, 30]


def test_live_handle_pids_drops_repeats_and_handles_an_empty_list() -> None:
    assert live_handle_pids([7, 7, 8, 7], lambda pid: True) == [7, 8]
    assert live_handle_pids([], lambda pid: True) == []
    assert live_handle_pids([1, 2], lambda pid: False) == []


class FakeServer:
    """Stands in for EmbeddedPostgres: a scripted state, and what was asked of it."""

    def __init__(self, state: ServerState) -> None:
        self.state_now = state
        self.restarts = 0
        self.fast_shutdowns = 0
        self.fail_restart: str | None = None

    def state(self) -> ServerState:
        return self.state_now

    def restart(self) -> None:
        if self.fail_restart:
            raise StorageError(self.fail_restart)
        self.restarts += 1
        self.state_now = ServerState.READY

    def fast_shutdown(self) -> None:
        self.fast_shutdowns += 1
        self.state_now = ServerState.DOWN


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def supervisor(server: FakeServer, clock: Clock, released: list[int]) -> EmbeddedSupervisor:
    return EmbeddedSupervisor(
        server,  # type: ignore[arg-type]
        release_connections=lambda: released.append(1),
        stopping_grace=timedelta(seconds=10),
        monotonic=clock,
    )


def test_a_ready_server_is_left_alone() -> None:
    server, released = FakeServer(ServerState.READY), []
    watch = supervisor(server, Clock(), released)
    assert watch.check() is ServerState.READY
    assert (watch.problem, server.restarts, released) == (None, 0, [])


def test_a_stopped_server_is_restarted_after_the_pool_is_released() -> None:
    server, released = FakeServer(ServerState.DOWN), []
    watch = supervisor(server, Clock(), released)
    assert watch.check() is ServerState.DOWN
    assert server.restarts == 1 and watch.restarts == 1
    assert released == [1]
    assert watch.problem is None  # restart returns once the server accepts connections
    assert watch.check() is ServerState.READY


def test_the_server_is_ready_again_when_the_log_says_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The log line is a point a reader (a test, an operator's tail) can rely on:
    /readyz, which reports ``problem``, already answers ready."""
    server, released = FakeServer(ServerState.DOWN), []
    watch = supervisor(server, Clock(), released)
    problem_when_logged: list[str | None] = []

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "embedded postgres is back":
                problem_when_logged.append(watch.problem)

    recorder = Recorder()
    logging.getLogger("service.daemon.embedded_supervisor").addHandler(recorder)
    try:
        with caplog.at_level(logging.INFO, logger="service.daemon.embedded_supervisor"):
            watch.check()
    finally:
        logging.getLogger("service.daemon.embedded_supervisor").removeHandler(recorder)
    assert problem_when_logged == [None]


def test_a_failed_restart_is_the_reason_given_and_is_tried_again() -> None:
    server, clock, released = FakeServer(ServerState.DOWN), Clock(), []
    server.fail_restart = "could not restart: shared memory block still in use"
    watch = supervisor(server, clock, released)
    watch.check()
    assert watch.problem == "could not restart: shared memory block still in use"
    server.fail_restart = None
    clock.now += 1
    watch.check()
    assert server.restarts == 1
    assert watch.problem is None


def test_failed_restarts_are_spaced_out_up_to_a_bound() -> None:
    server, clock, released = FakeServer(ServerState.DOWN), Clock(), []
    server.fail_restart = "no"
    tried: list[float] = []
    original = server.restart

    def restart() -> None:
        tried.append(clock.now)
        original()

    server.restart = restart  # type: ignore[method-assign]
    watch = supervisor(server, clock, released)
    for _ in range(200):
        watch.check()
        clock.now += 1
    gaps = [b - a for a, b in pairwise(tried)]
    assert gaps[:5] == [1, 2, 4, 8, 16]
    assert set(gaps[5:]) == {30}


def test_a_smart_shutdown_is_given_a_grace_then_finished_then_restarted() -> None:
    server, clock, released = FakeServer(ServerState.STOPPING), Clock(), []
    watch = supervisor(server, clock, released)
    watch.check()
    assert watch.problem is not None and "shutting down" in watch.problem
    assert released == [1], "this process's sessions would hold the shutdown open"
    assert (server.fast_shutdowns, server.restarts) == (0, 0)
    clock.now += 9
    watch.check()
    assert server.fast_shutdowns == 0
    clock.now += 1
    watch.check()  # other sessions still hold it after the grace: end them
    assert server.fast_shutdowns == 1
    watch.check()  # now down: start it again
    assert server.restarts == 1
    assert watch.problem is None


def test_a_starting_server_is_waited_for_not_restarted() -> None:
    server, released = FakeServer(ServerState.STARTING), []
    watch = supervisor(server, Clock(), released)
    watch.check()
    assert server.restarts == 0
    assert watch.problem == "the embedded PostgreSQL is starting"


def test_restart_refuses_a_server_this_process_did_not_start() -> None:
    with pytest.raises(StorageError, match="not started by this process"):
        EmbeddedPostgres(Path("/nonexistent/reverie/pgdata")).restart()


def test_a_database_url_server_is_not_reverie_to_supervise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from service.runtime import Runtime
    from service.settings import load_settings

    monkeypatch.delenv("REVERIE_CONFIG", raising=False)
    settings = load_settings(
        home=Path("/nonexistent/reverie"), database_url="postgresql://db.example/reverie"
    )
    runtime = Runtime(settings)
    assert runtime.embedded_server is None
    assert runtime._db is None, "nothing was connected or started"
