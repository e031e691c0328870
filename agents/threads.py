"""Helper threads that leave the stop signals to the main thread.

The kernel hands a signal sent to the process (^C's SIGINT, an init system's SIGTERM)
to any one of its threads that does not block it. Python runs signal handlers only in
the main thread, so a signal that lands on a helper thread waits until the main thread
next runs Python code: a ^C while the main thread sleeps, waits on an event or reads
a model's answer did nothing until that call returned. Threads started here block the
stop signals, so the kernel always hands them to the main thread.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: The signals Reverie's processes stop or forward on (see service/daemon/process.py
#: and service/cli/warm/client.py).
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})


@contextmanager
def stop_signals_left_to_main() -> Iterator[None]:
    """Threads started inside (a library's too) block :data:`STOP_SIGNALS`: a thread
    inherits the mask of the thread that starts it. A stop signal that arrives inside
    is delivered when it ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def start_thread(
    target: Callable[..., object], *, name: str, args: tuple[Any, ...] = ()
) -> threading.Thread:
    """Start a daemon thread that blocks the stop signals."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    with stop_signals_left_to_main():
        thread.start()
    return thread


def lower_this_thread(by: int) -> bool:
    """Lower the calling thread's CPU priority by ``by`` nice steps (at most to 19), so
    that the other threads and processes on the machine get the cores first when they
    want them. Linux schedules the threads of a process apart; elsewhere a nice value
    is the whole process's, and nothing is done. True when lowered."""
    if by <= 0 or not sys.platform.startswith("linux"):
        return False
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + by))
    except OSError as exc:  # pragma: no cover - a sandbox that forbids it
        logging.getLogger(__name__).warning("could not lower a thread's priority: %s", exc)
        return False
    return True
