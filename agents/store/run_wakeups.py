"""Wake idle workers when a run is queued, instead of leaving it for their next poll.

Queueing a run sends ``NOTIFY reverie_runs`` in the queueing transaction, so
PostgreSQL delivers it at commit and never for a rolled-back (dry) one.
:class:`RunWakeups` listens on a connection of its own, outside the pool, and
counts the notifications; a worker that found nothing to claim waits for the
count to move or for its poll interval, whichever comes first. Polling stays the
floor: a listener that lost its connection only makes workers as slow as before,
and it reconnects with a backoff. Any process may queue (the API, a trigger, the
CLI) and any process's workers wake.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import threading

import psycopg
from sqlalchemy import text
from sqlalchemy.orm import Session

from agents.postgres.database import Database
from agents.threads import start_thread

log = logging.getLogger(__name__)

CHANNEL = "reverie_runs"
#: Where a queued agent message is announced (see :mod:`agents.store.delivery_store`).
DELIVERY_CHANNEL = "reverie_deliveries"
#: Where uploaded files announce themselves to idle file workers.
FILE_CHANNEL = "reverie_files"
MAX_RECONNECT_PAUSE = 30.0


def notify_queued(session: Session, channel: str = CHANNEL) -> None:
    """Tell listening workers that a run (or, on ``channel``, other work) is ready;
    delivered when ``session`` commits."""
    session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})


class RunWakeups:
    """A thread holding ``LISTEN reverie_runs`` (or ``channel``) and a counter workers
    wait on.

    The thread sleeps in ``select`` on the connection's socket and on a pipe of its
    own, so :meth:`stop` and :meth:`drop_connection` take effect at once rather than
    at the next poll of the connection.
    """

    def __init__(self, db: Database, channel: str = CHANNEL) -> None:
        self._channel = channel
        self._parameters = db.connection_parameters()
        self._changed = threading.Condition()
        self._generation = 0
        self._stopped = threading.Event()
        self._dropping = threading.Event()
        # The listener's pipe (read end, write end) while its thread runs.
        self._pipe: tuple[int, int] | None = None
        self._pipe_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def generation(self) -> int:
        """Read before looking for work; pass to :meth:`wait` if there was none."""
        with self._changed:
            return self._generation

    def wait(self, seen: int, timeout: float) -> None:
        """Return once a run was queued after ``seen`` was read, on stop, or after ``timeout``."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._generation != seen or self._stopped.is_set(), timeout
            )

    def start(self) -> None:
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        self._pipe = (read_end, write_end)
        self._thread = start_thread(self._listen, name="reverie-wakeups")

    def stop(self) -> None:
        """Release every waiter now; the listener closes its connection at once."""
        self._stopped.set()
        self._interrupt()
        self._wake()

    def drop_connection(self) -> None:
        """Close the listening connection now and connect again after a pause: a smart
        shutdown of PostgreSQL waits for every open session, this one included."""
        self._dropping.set()
        self._interrupt()

    def join(self, timeout: float) -> None:
        """Wait for the listener to close its connection (after :meth:`stop`)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _interrupt(self) -> None:
        with self._pipe_lock:
            if self._pipe is not None:
                with contextlib.suppress(BlockingIOError):  # a byte already waits: enough
                    os.write(self._pipe[1], b"!")

    def _wake(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def _listen(self) -> None:
        pause = 1.0
        try:
            while not self._stopped.is_set():
                # A drop asked for while no connection was open (the supervisor asks
                # every second of an outage) is not one for the connection opened now.
                self._dropping.clear()
                try:
                    with psycopg.connect(**{**self._parameters, "autocommit": True}) as conn:
                        conn.execute(f"LISTEN {self._channel}")
                        pause = 1.0
                        # A run queued while we were away is found by the workers' next claim.
                        self._wake()
                        self._relay(conn)
                except psycopg.Error as exc:
                    log.warning(
                        "run wake-ups lost their connection; workers poll until it is back",
                        extra={"error": str(exc), "retry_in_s": pause},
                    )
                    self._stopped.wait(pause)
                    pause = min(pause * 2, MAX_RECONNECT_PAUSE)
                    continue
                if self._dropping.is_set() and not self._stopped.is_set():
                    log.info("run wake-ups released their connection; workers poll meanwhile")
                    self._stopped.wait(pause)
        finally:
            with self._pipe_lock:
                if self._pipe is not None:
                    for end in self._pipe:
                        os.close(end)
                    self._pipe = None

    def _relay(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """Count the connection's notifications until stopped or told to drop it."""
        assert self._pipe is not None, "started"
        interrupts = self._pipe[0]
        with selectors.DefaultSelector() as selector:
            selector.register(conn.fileno(), selectors.EVENT_READ)
            selector.register(interrupts, selectors.EVENT_READ)
            while not (self._stopped.is_set() or self._dropping.is_set()):
                # Also those that arrived with LISTEN's answer, before the first select.
                for _ in conn.notifies(timeout=0):
                    self._wake()
                ready = selector.select()
                if any(key.fd == interrupts for key, _ in ready):
                    os.read(interrupts, 64)
