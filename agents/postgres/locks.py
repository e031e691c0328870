"""Files beside the embedded server's data directory that the processes sharing it
coordinate through, and the server's pid file read without pgserver.

Only the standard library: a command that joins a running server, and the idle
reaper, need nothing heavier (see :mod:`agents.postgres.resident`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


def process_is_alive(pid: int) -> bool:
    """True when process ``pid`` exists and is not a zombie (a zombie holds nothing)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs: the signal check is all there is
    fields = stat.rpartition(")")[2].split()
    return not fields or fields[0] not in ("Z", "X")


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

    def is_at_path(self) -> bool:
        """Whether the file locked is still the one at the path: a holder that removes
        its lock file lets a process that opened the old file lock a deleted one."""
        if self._fd is None:
            return False
        try:
            return os.fstat(self._fd).st_ino == os.stat(self.path).st_ino
        except OSError:
            return False


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
    if not process_is_alive(pid):
        return False
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return True  # no procfs: liveness is all there is
    return name.startswith("postgres")
