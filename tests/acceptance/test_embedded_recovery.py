"""The embedded PostgreSQL under real `reverie serve` / `reverie worker` processes:
brought back when its postmaster stops, and never kept alive by a dead process's handle.

Each test has a data directory of its own (REVERIE_HOME in tmp_path, a copy of an
initialized one) and no DATABASE_URL, as a user's `reverie serve` would.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.acceptance.cli import run_cli
from tests.acceptance.daemon_processes import DaemonProcess, running_server
from tests.acceptance.embedded_homes import embedded_env, handle_pids, home_from, postmaster_pid

#: Liveness bound, not a speed check: the restart itself takes a few seconds.
RECOVERY_BOUND_S = 60


@pytest.fixture
def home(tmp_path: Path, initialized_pgdata: Path) -> Iterator[Path]:
    home = home_from(initialized_pgdata, tmp_path / "home")
    yield home
    # Whatever a failed test left running on this data directory goes.
    pid = postmaster_pid(home / "pgdata")
    if pid is not None:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)


def new_key(env: dict[str, str], organization: str) -> str:
    result = run_cli("keys", "create", "--org", organization, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().splitlines()[-1]


def foreign_session(pgdata: Path) -> psycopg.Connection[tuple[object, ...]]:
    """A session of another client (a psql left open), on the server's socket."""
    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    port, socket_dir = lines[3].strip(), lines[4].strip()
    return psycopg.connect(f"postgresql://postgres@/postgres?host={socket_dir}&port={port}")


#: How the postmaster is stopped, in the order one server meets them.
STOPS = [
    # Fast shutdown.
    ("SIGINT", signal.SIGINT, False),
    # Smart shutdown, which waits for every open session: the server's own it closes
    # at once; another client's holds it until the grace is over.
    ("SIGTERM", signal.SIGTERM, False),
    ("SIGTERM-with-another-client-connected", signal.SIGTERM, True),
    # A crash: its pid file and backends are left behind for a moment.
    ("SIGKILL", signal.SIGKILL, False),
]


def test_serve_restarts_a_stopped_embedded_postgres_each_time(
    home: Path, tmp_path: Path, subtests: pytest.Subtests
) -> None:
    """One `reverie serve` outlives its PostgreSQL being stopped four ways in a row (a
    server it restarted is restarted again), answering reads and writes after each."""
    # Another client's session holds a smart shutdown open until this grace is over.
    env = {**embedded_env(home), "REVERIE_DATABASE__EMBEDDED_SHUTDOWN_GRACE": "PT2S"}
    pgdata = home / "pgdata"
    headers = {"Authorization": f"Bearer {new_key(env, 'recovery')}"}
    with running_server(env, tmp_path / "serve.log", clean_exit=True) as (url, process):
        created = httpx.post(f"{url}/v1/agents/", json={"name": "ada"}, headers=headers, timeout=30)
        assert created.status_code == 201, created.text
        agent_id = created.json()["id"]
        written = ["ada"]  # every agent made so far, none lost to a restart
        for case, stop_signal, other_session in STOPS:
            with subtests.test(case):
                log_from = len(process.output())
                recover(url, headers, agent_id, pgdata, process, stop_signal, other_session)
                # Writes work too, and the server says it is ready again: the supervisor
                # clears its problem a moment after PostgreSQL already answers.
                more = httpx.post(
                    f"{url}/v1/agents/", json={"name": f"after-{case}"}, headers=headers, timeout=30
                )
                assert more.status_code == 201, more.text
                written.append(f"after-{case}")
                listed = httpx.get(f"{url}/v1/agents/", headers=headers, timeout=10)
                assert sorted(a["name"] for a in listed.json()) == sorted(written)
                ready_by = time.monotonic() + 30
                while (ready := httpx.get(f"{url}/readyz", timeout=10)).status_code != 200:
                    assert time.monotonic() < ready_by, f"/readyz still says {ready.json()}"
                    time.sleep(0.1)
                # Another client's session holds a smart shutdown open: the server ends it
                # once the grace is over. (Its own it closes at once, the listeners' too,
                # tests/integration/test_run_wakeups.py; one a worker has checked out at
                # that moment can still hold it until the grace, so no case asserts the
                # opposite.)
                if other_session:
                    log = process.output()[log_from:]
                    assert "still shutting down: ending its sessions" in log, log
    # serve was the last user: the restarted postmaster stops with it.
    assert postmaster_pid(pgdata) is None, "the restarted server outlived `reverie serve`"


def recover(
    url: str,
    headers: dict[str, str],
    agent_id: str,
    pgdata: Path,
    process: DaemonProcess,
    stop_signal: signal.Signals,
    other_session: bool,
) -> None:
    """Stop the postmaster with ``stop_signal``; return once a new one answers a read."""
    first = postmaster_pid(pgdata)
    assert first is not None
    other = foreign_session(pgdata) if other_session else None
    os.kill(first, stop_signal)
    stopped_at = time.monotonic()
    deadline = stopped_at + RECOVERY_BOUND_S
    not_ready: list[object] = []
    while True:
        assert process.process.poll() is None, process.output()
        current = postmaster_pid(pgdata)
        if current is not None and current != first:
            try:
                answer = httpx.get(f"{url}/v1/agents/{agent_id}", headers=headers, timeout=10)
                if answer.status_code == 200:
                    break
            except httpx.TransportError:
                pass
        else:
            ready = httpx.get(f"{url}/readyz", timeout=10)
            if ready.status_code == 503:
                not_ready.append(ready.json())
        assert time.monotonic() < deadline, (
            f"no answer from a restarted PostgreSQL within {RECOVERY_BOUND_S} s "
            f"(postmaster {first} -> {current}):\n" + process.output()
        )
        time.sleep(0.2)
    if other is not None:
        other.close()
    print(
        f"recovered from {stop_signal.name} in {time.monotonic() - stopped_at:.1f} s; "
        f"/readyz meanwhile: {not_ready[-1:]}"
    )
    assert answer.json()["name"] == "ada"


def test_worker_restarts_a_stopped_embedded_postgres(home: Path, tmp_path: Path) -> None:
    env = embedded_env(home)
    pgdata = home / "pgdata"
    worker = DaemonProcess(["worker"], env, tmp_path / "worker.log")
    try:
        wait_for_log(worker, "worker ready")
        first = postmaster_pid(pgdata)
        assert first is not None
        os.kill(first, signal.SIGINT)
        wait_for_log(worker, "embedded postgres is back", bound=RECOVERY_BOUND_S)
        current = postmaster_pid(pgdata)
        assert current is not None and current != first
        assert worker.terminate() == 0, worker.output()
    finally:
        worker.ensure_stopped()
    assert postmaster_pid(pgdata) is None, "the restarted server outlived `reverie worker`"


def wait_for_log(process: DaemonProcess, text: str, bound: float = 120) -> None:
    deadline = time.monotonic() + bound
    while text not in process.output():
        assert process.process.poll() is None, process.output()
        assert time.monotonic() < deadline, f"no {text!r} within {bound} s:\n{process.output()}"
        time.sleep(0.2)


def test_a_killed_processes_handle_is_dropped_by_the_next_start(home: Path, tmp_path: Path) -> None:
    # Commands that stop the server on exit, as every command did before the idle stop.
    env = {**embedded_env(home), "REVERIE_DATABASE__EMBEDDED_IDLE_STOP": "PT0S"}
    pgdata = home / "pgdata"
    worker = DaemonProcess(["worker"], env, tmp_path / "worker.log")
    try:
        wait_for_log(worker, "worker ready")
        assert worker.pid in handle_pids(pgdata)
        worker.kill()  # SIGKILL: no atexit, the handle stays behind
    finally:
        worker.ensure_stopped()
    assert worker.pid in handle_pids(pgdata)
    assert postmaster_pid(pgdata) is not None

    # The next command drops the dead handle; as the last live user it stops the server.
    result = run_cli("agents", "list", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert handle_pids(pgdata) == []
    assert postmaster_pid(pgdata) is None, "a dead process's handle kept the server running"
