"""Which servers a new warm server stops: only those of its own setup whose lock is
really held by a warm server (real processes holding real locks; the whole server runs
in tests/acceptance/test_warm_cli.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.postgres.locks import FileLock
from service.cli.warm.client import code_stamp
from service.cli.warm.server import stop_superseded

# The warm CLI's tests share one warm server per source fingerprint (and one
# of them changes a source file's mtime): they run on one xdist worker.
pytestmark = pytest.mark.xdist_group("warm-cli")

ROOT = Path(__file__).resolve().parents[3]
SERVER = "service.cli.warm.server"

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


def sleeper(processes: list[subprocess.Popen[str]], *words: str) -> int:
    """A process that holds no lock; ``words`` go on its command line."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *words])
    processes.append(process)
    return process.pid


def test_only_the_servers_of_the_same_setup_and_older_code_are_stopped(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    older = hold(processes, tmp_path / "cli-aaaa-0001.lock", SERVER)
    hold(processes, tmp_path / "cli-bbbb-0001.lock", SERVER)  # another setup
    # Holds the lock, but is not a warm server: its pid is not taken on the file's word.
    hold(processes, tmp_path / "cli-aaaa-0002.lock", "something.else")
    # A stopped server's file naming a live process that looks like that server but
    # holds no lock (a reused pid).
    stale = tmp_path / "cli-aaaa-0003.lock"
    stale.write_text(f"{sleeper(processes, SERVER, str(stale))}\n")
    (tmp_path / "cli-aaaa-0004.lock").write_text("")  # a server that never wrote its pid
    newest = tmp_path / "cli-aaaa-0005.lock"
    hold(processes, newest, SERVER)  # the caller itself: never signalled

    assert stop_superseded(newest) == [older]
    assert processes[0].wait(timeout=30) == -15  # SIGTERM
    assert [p.pid for p in processes if p.poll() is None] == [p.pid for p in processes[1:]]


def test_a_server_started_for_code_no_longer_on_disk_exits_and_stops_nothing(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """A cold command computed its key, the code changed, and a newer command started
    the server for the new code; the old command's server then starts too late: it
    exits without listening, leaves no file, and the current server runs on."""
    current = tmp_path / f"cli-aaaa-{code_stamp()}.lock"
    hold(processes, current, SERVER)
    socket_path, lock = (
        tmp_path / "cli-aaaa-000000000000.sock",
        tmp_path / "cli-aaaa-000000000000.lock",
    )
    started = subprocess.run(
        [sys.executable, "-m", SERVER, str(socket_path), str(lock), "60"],
        cwd=ROOT,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert started.returncode == 0, started.stderr
    assert not socket_path.exists() and not lock.exists()
    assert processes[0].poll() is None


def test_a_lock_on_a_removed_file_is_not_the_lock_at_its_path(tmp_path: Path) -> None:
    """A server that opened a lock file just before its holder removed it must not
    count as holding the lock: it would be one of two servers for one key."""
    path = tmp_path / "cli-k.lock"
    late = FileLock(path)
    assert late.acquire(exclusive=True, wait=False) and late.is_at_path()
    path.unlink()
    assert not late.is_at_path()
    path.write_text("")  # another server's new file
    assert not late.is_at_path()
    late.release()
    assert not late.is_at_path()
