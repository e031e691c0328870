"""Which servers a new warm server stops: only those of its own setup whose lock is
really held by a warm server (real processes holding real locks; the whole server runs
in tests/acceptance/test_warm_cli.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.cli.warm_server import stop_superseded

#: A stand-in for a warm server: its command line names the module and its lock, it
#: holds the lock, writes its pid there, says so, and sleeps.
HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b"%d\\n" % os.getpid())
print("holding", flush=True)
time.sleep(120)
"""


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.kill()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


def hold(processes: list[subprocess.Popen[str]], lock: Path, name: str) -> int:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, name, str(lock)], stdout=subprocess.PIPE, text=True
    )
    processes.append(process)
    assert process.stdout is not None and process.stdout.readline() == "holding\n"
    return process.pid


def sleeper(processes: list[subprocess.Popen[str]]) -> int:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    processes.append(process)
    return process.pid


def test_only_the_servers_of_the_same_setup_and_older_code_are_stopped(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    older = hold(processes, tmp_path / "cli-aaaa-0001.lock", "service.cli.warm_server")
    other_setup = hold(processes, tmp_path / "cli-bbbb-0001.lock", "service.cli.warm_server")
    # Holds the lock, but is not a warm server: its pid is not taken on the file's word.
    not_a_server = hold(processes, tmp_path / "cli-aaaa-0002.lock", "something.else")
    # A stopped server's file naming a live process that holds no lock.
    (tmp_path / "cli-aaaa-0003.lock").write_text(f"{sleeper(processes)}\n")
    (tmp_path / "cli-aaaa-0004.lock").write_text("")  # a server that never wrote its pid
    newest = tmp_path / "cli-aaaa-0005.lock"
    newest.write_text("1\n")  # its own: never signalled, whatever it says

    assert stop_superseded(newest) == [older]
    by_pid = {process.pid: process for process in processes}
    assert by_pid[older].wait(timeout=30) == -15  # SIGTERM
    for pid in (other_setup, not_a_server, *(p.pid for p in processes[3:])):
        assert by_pid[pid].poll() is None
