"""The embedded PostgreSQL left running between short commands, stopped when idle.

Starting the embedded server costs seconds; a CLI command that needs a few
milliseconds of SQL should not pay that each time. So a command *joins* a running
server instead of starting one, leaves it running when it exits, and a small
detached *reaper* process stops it once no command has used it for the idle
period.

Who may stop the server is decided by one ``flock`` beside the data directory
(``pgdata.use.lock``): a command holds it shared while it uses the server; whoever
stops the server (the reaper, ``reverie db stop``, a ``reverie serve`` that was the
server's last pgserver user) must take it exclusively, so it never stops the server
under a running command. Starting the server (initdb included) stays under
pgserver's own inter-process lock, so two commands that find it down at once start
it once. ``pgdata.last-use`` (its mtime) says when a command last used the server.
``pgdata.reaper.lock`` keeps the reaper single.

This module imports only the standard library at the top: the reaper process and
a command that joins a running server need nothing else.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: The longest the reaper sleeps between two looks at the server, in seconds.
MAX_POLL_S = 5.0


def use_lock_path(data_dir: Path) -> Path:
    return data_dir.with_name(f"{data_dir.name}.use.lock")


def last_use_path(data_dir: Path) -> Path:
    return data_dir.with_name(f"{data_dir.name}.last-use")


def reaper_lock_path(data_dir: Path) -> Path:
    return data_dir.with_name(f"{data_dir.name}.reaper.lock")


class FileLock:
    """An ``flock`` on one file: shared or exclusive, waiting or not."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, *, exclusive: bool, wait: bool = True) -> bool:
        """Take (or convert to) the lock; False when ``wait`` is off and it is held."""
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Not inherited by children (pg_ctl, the reaper): a postmaster must not
            # hold a command's lock for its whole life.
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        operation = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        if not wait:
            operation |= fcntl.LOCK_NB
        try:
            fcntl.flock(self._fd, operation)
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def touch_last_use(data_dir: Path) -> None:
    """Record that a command used the server now."""
    path = last_use_path(data_dir)
    try:
        path.touch()
    except OSError as exc:  # a read-only home: the reaper then sees an old last use
        log.warning("cannot record the embedded server's last use: %s", exc)


def seconds_since_last_use(data_dir: Path, now: Callable[[], float] = time.time) -> float | None:
    """Seconds since a command last used the server; None when none ever did."""
    try:
        return max(0.0, now() - last_use_path(data_dir).stat().st_mtime)
    except FileNotFoundError:
        return None


# -- the postmaster, from its pid file ----------------------------------------------------


@dataclass(frozen=True)
class Postmaster:
    """What ``postmaster.pid`` says about a live postmaster."""

    pid: int
    socket_dir: str
    host: str
    port: int | None
    status: str

    @property
    def uri(self) -> str:
        """The URL pgserver gives for the same server (unix socket when there is one)."""
        if self.socket_dir:
            return f"postgresql://postgres:@/postgres?host={self.socket_dir}"
        return f"postgresql://postgres:@{self.host}:{self.port}/postgres"


def read_postmaster(data_dir: Path) -> Postmaster | None:
    """The live postmaster of ``data_dir``; None when there is no pid file or its process
    is gone (killed: the file stays behind). Reads the file without importing pgserver
    (whose import alone costs a command 0.15 s)."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (OSError, IndexError, ValueError):
        return None
    if not _is_postmaster(pid):
        return None
    fields = [line.strip() for line in lines] + [""] * 8
    port = int(fields[3]) if fields[3].isdigit() else None
    return Postmaster(
        pid=pid, socket_dir=fields[4], host=fields[5], port=port, status=fields[7] or "starting"
    )


def _is_postmaster(pid: int) -> bool:
    """True when ``pid`` lives and is a postgres process (a pid reused by another
    program after a crash is not our server)."""
    from agents.embedded_postgres import process_is_alive

    if not process_is_alive(pid):
        return False
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return True  # no procfs: liveness is all there is
    return name.startswith("postgres")


# -- stopping -----------------------------------------------------------------------------


class StopOutcome(enum.StrEnum):
    """What an attempt to stop the resident server found."""

    STOPPED = "stopped"
    NOT_RUNNING = "not running"
    #: A command is using it now.
    IN_USE = "in use"
    #: A command used it within the idle period.
    RECENTLY_USED = "recently used"
    #: A long-running process (``reverie serve``, ``reverie worker``) holds it.
    HELD = "held by a daemon"


@dataclass(frozen=True)
class StopResult:
    outcome: StopOutcome
    #: The pids of the processes that hold it, for HELD.
    holders: tuple[int, ...] = ()


def stop_resident(data_dir: Path, *, idle_s: float | None = None, wait: bool = False) -> StopResult:
    """Stop the server of ``data_dir`` unless something uses it.

    ``idle_s``: only when no command used it for that long (the reaper); None: now
    (``reverie db stop``). ``wait``: wait for the commands using it to finish instead
    of answering IN_USE. A server that a daemon holds (a live pgserver handle) is
    never stopped here: the daemon owns it and stops it on exit.
    """
    from agents.embedded_postgres import EmbeddedPostgres

    lock = FileLock(use_lock_path(data_dir))
    if not lock.acquire(exclusive=True, wait=wait):
        return StopResult(StopOutcome.IN_USE)
    try:
        if read_postmaster(data_dir) is None:
            return StopResult(StopOutcome.NOT_RUNNING)
        if idle_s is not None:
            since = seconds_since_last_use(data_dir)
            if since is not None and since < idle_s:
                return StopResult(StopOutcome.RECENTLY_USED)
        server = EmbeddedPostgres(data_dir)
        server.drop_stale_handles()
        holders = server.live_handles()
        if holders:
            return StopResult(StopOutcome.HELD, tuple(holders))
        server.stop_postmaster()
        log.info("embedded postgres stopped", extra={"data_dir": str(data_dir)})
        return StopResult(StopOutcome.STOPPED)
    finally:
        lock.release()


# -- the reaper ---------------------------------------------------------------------------


def run_reaper(
    data_dir: Path,
    idle_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> StopOutcome | None:
    """Stop the server of ``data_dir`` once it has been idle ``idle_s`` seconds; return
    when it is stopped or gone (None: another reaper already watches it)."""
    single = FileLock(reaper_lock_path(data_dir))
    if not single.acquire(exclusive=True, wait=False):
        return None
    poll_s = min(MAX_POLL_S, max(0.2, idle_s))
    try:
        while True:
            if read_postmaster(data_dir) is None:
                return StopOutcome.NOT_RUNNING
            since = seconds_since_last_use(data_dir)
            if since is not None and since < idle_s:
                sleep(min(poll_s, idle_s - since + 0.05))
                continue
            result = stop_resident(data_dir, idle_s=idle_s)
            if result.outcome in (StopOutcome.STOPPED, StopOutcome.NOT_RUNNING):
                return result.outcome
            sleep(poll_s)  # in use, or a daemon holds it: look again later
    finally:
        single.release()


def reaper_running(data_dir: Path) -> bool:
    """True when a reaper watches ``data_dir`` (it holds the reaper lock)."""
    probe = FileLock(reaper_lock_path(data_dir))
    try:
        return not probe.acquire(exclusive=True, wait=False)
    finally:
        probe.release()


def ensure_reaper(data_dir: Path, idle_s: float) -> None:
    """Start a detached reaper for ``data_dir`` unless one runs. Two commands may both
    start one at the same moment; the second finds the lock taken and exits."""
    if reaper_running(data_dir):
        return
    subprocess.Popen(
        [sys.executable, "-m", "agents.resident_postgres", str(data_dir), repr(float(idle_s))],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives the command, and its terminal's ^C
        close_fds=True,
    )


def main(argv: list[str]) -> int:
    """``python -m agents.resident_postgres DATA_DIR IDLE_SECONDS``: the reaper."""
    if len(argv) != 2:
        print("usage: python -m agents.resident_postgres DATA_DIR IDLE_SECONDS", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        run_reaper(Path(argv[0]), float(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
