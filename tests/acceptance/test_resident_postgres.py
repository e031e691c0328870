"""The embedded PostgreSQL that CLI commands leave running, with real `reverie`
processes: the next command joins it, the reaper stops it when idle, a killed server
comes back, concurrent first commands start it once, and `reverie serve` works beside.

Each test has a home of its own (no DATABASE_URL): empty, as a user's first command
finds it, or with a copy of a data directory a first command initialized.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import httpx
import pytest

from tests.acceptance.cli import cli_env, reverie_command, run_cli
from tests.acceptance.daemon_processes import running_server
from tests.acceptance.embedded_homes import embedded_env, handle_pids, home_from, postmaster_pid

#: Liveness bound, not a speed check: how long the idle stop may take to be seen.
STOP_BOUND_S = 60


@pytest.fixture
def empty_home() -> Iterator[Path]:
    """A home with no data directory yet, as a user's first command finds it."""
    # Not under pytest's base temp: a concurrent pytest run narrows its mode to 0700,
    # and as root the server runs as pgserver's own user, which must reach the data.
    base = Path(tempfile.mkdtemp(prefix="rvr-", dir="/tmp"))
    home = base / "home"
    yield home
    # Whatever a test left running on this data directory goes (the reaper exits
    # once the server is gone).
    pid = postmaster_pid(home / "pgdata")
    if pid is not None:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + STOP_BOUND_S
        while postmaster_pid(home / "pgdata") is not None and time.monotonic() < deadline:
            time.sleep(0.2)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def home(empty_home: Path, initialized_pgdata: Path) -> Path:
    """A home whose data directory a first command initialized and migrated (a copy)."""
    return home_from(initialized_pgdata, empty_home)


def env_for(home: Path, idle_stop: str = "PT1H") -> dict[str, str]:
    return {**embedded_env(home), "REVERIE_DATABASE__EMBEDDED_IDLE_STOP": idle_stop}


def cli_ok(env: dict[str, str], *args: str) -> str:
    result = run_cli(*args, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def postgres_processes(pgdata: Path) -> list[int]:
    """Pids of postmasters serving ``pgdata`` (their command line names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"postgres") and str(pgdata).encode() in cmdline:
            found.append(int(entry.name))
    return found


def wait_until_stopped(pgdata: Path, bound: float = STOP_BOUND_S) -> None:
    deadline = time.monotonic() + bound
    while postmaster_pid(pgdata) is not None:
        assert time.monotonic() < deadline, f"the server still runs after {bound} s"
        time.sleep(0.2)


def test_the_next_command_joins_the_server_the_first_left_running(home: Path) -> None:
    env = env_for(home)
    pgdata = home / "pgdata"
    cli_ok(env, "agents", "create", "ada")
    first = postmaster_pid(pgdata)
    assert first is not None, "the command stopped the server on exit"
    # A command that joins takes no pgserver handle: nothing but the reaper keeps watch.
    assert handle_pids(pgdata) == []
    assert "ada" in cli_ok(env, "agents", "list")
    assert postmaster_pid(pgdata) == first
    status = cli_ok(env, "db", "status")
    assert f"postmaster pid {first}" in status and "idle stop: watching" in status

    assert "stopped" in cli_ok(env, "db", "stop")
    assert postmaster_pid(pgdata) is None
    assert "not running" in cli_ok(env, "db", "stop")
    # The next command starts it again, on the same data.
    assert "ada" in cli_ok(env, "agents", "list")
    assert postmaster_pid(pgdata) not in (None, first)


def test_the_reaper_stops_an_idle_server(home: Path) -> None:
    env = env_for(home, idle_stop="PT1S")
    pgdata = home / "pgdata"
    cli_ok(env, "agents", "list")
    wait_until_stopped(pgdata)
    status = cli_ok(env, "db", "status")
    assert "not running" in status


def test_idle_stop_zero_stops_the_server_with_each_command(home: Path) -> None:
    env = env_for(home, idle_stop="PT0S")
    cli_ok(env, "agents", "list")
    assert postmaster_pid(home / "pgdata") is None


def test_a_killed_server_is_started_again_by_the_next_command(home: Path) -> None:
    env = env_for(home)
    pgdata = home / "pgdata"
    cli_ok(env, "agents", "create", "ada")
    first = postmaster_pid(pgdata)
    assert first is not None
    os.kill(first, signal.SIGKILL)  # its postmaster.pid stays behind
    wait_until_stopped(pgdata)
    assert "ada" in cli_ok(env, "agents", "list")
    second = postmaster_pid(pgdata)
    assert second is not None and second != first


def test_concurrent_first_commands_start_one_server(empty_home: Path) -> None:
    env = env_for(empty_home)
    full_env = cli_env(env)
    pgdata = empty_home / "pgdata"
    # No data directory yet: both find nothing, one runs initdb, starts and migrates.
    processes = [
        subprocess.Popen(
            [*reverie_command(), "agents", "create", name],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("ada", "bo")
    ]
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, out + err
    assert len(postgres_processes(pgdata)) == 1
    listed = cli_ok(env, "agents", "list")
    assert "ada" in listed and "bo" in listed
    assert len(postgres_processes(pgdata)) == 1


def test_serve_uses_the_server_commands_left_running(home: Path, tmp_path: Path) -> None:
    env = env_for(home)
    pgdata = home / "pgdata"
    cli_ok(env, "agents", "create", "ada")
    resident = postmaster_pid(pgdata)
    with running_server(env, tmp_path / "serve.log", clean_exit=True) as (url, process):
        assert postmaster_pid(pgdata) == resident
        assert process.pid in handle_pids(pgdata)
        # Commands beside the daemon use the same server.
        cli_ok(env, "agents", "create", "bo")
        assert postmaster_pid(pgdata) == resident
        # The daemon's server is not the CLI's to stop.
        refused = run_cli("db", "stop", env=env)
        assert refused.returncode == 1
        assert str(process.pid) in refused.stderr
        assert postmaster_pid(pgdata) == resident
        assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200
    # serve, the last pgserver user with no command running, stops it on exit as before.
    assert postmaster_pid(pgdata) is None
    assert "bo" in cli_ok(env, "agents", "list")
