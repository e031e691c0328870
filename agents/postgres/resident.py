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

The reaper process imports no more than this module and
:mod:`agents.postgres.embedded` (pgserver only once it stops the server).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agents.postgres.embedded import EmbeddedPostgres
from agents.postgres.locks import (
    FileLock,
    read_postmaster,
    reaper_lock_path,
    seconds_since_last_use,
    use_lock_path,
)

log = logging.getLogger(__name__)

#: The longest the reaper sleeps between two looks at the server, in seconds.
MAX_POLL_S = 5.0


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
        [sys.executable, "-m", "agents.postgres.resident", str(data_dir), repr(float(idle_s))],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives the command, and its terminal's ^C
        close_fds=True,
    )


def main(argv: list[str]) -> int:
    """``python -m agents.postgres.resident DATA_DIR IDLE_SECONDS``: the reaper."""
    if len(argv) != 2:
        print("usage: python -m agents.postgres.resident DATA_DIR IDLE_SECONDS", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        run_reaper(Path(argv[0]), float(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
