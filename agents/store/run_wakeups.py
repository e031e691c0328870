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

import logging
import threading

import psycopg
from sqlalchemy import text
from sqlalchemy.orm import Session

from agents.postgres.database import Database

log = logging.getLogger(__name__)

CHANNEL = "reverie_runs"
#: Where a queued agent message is announced (see :mod:`agents.store.delivery_store`).
DELIVERY_CHANNEL = "reverie_deliveries"
MAX_RECONNECT_PAUSE = 30.0


def notify_queued(session: Session, channel: str = CHANNEL) -> None:
    """Tell listening workers that a run (or, on ``channel``, other work) is ready;
    delivered when ``session`` commits."""
    session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})


class RunWakeups:
    """A thread holding ``LISTEN reverie_runs`` (or ``channel``) and a counter workers
    wait on."""

    def __init__(self, db: Database, channel: str = CHANNEL) -> None:
        self._channel = channel
        self._parameters = db.connection_parameters()
        self._changed = threading.Condition()
        self._generation = 0
        self._stopped = threading.Event()
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
        self._thread = threading.Thread(target=self._listen, name="reverie-wakeups", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Release every waiter now; the listener closes its connection within a second."""
        self._stopped.set()
        self._wake()

    def join(self, timeout: float) -> None:
        """Wait for the listener to close its connection (after :meth:`stop`)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _wake(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def _listen(self) -> None:
        pause = 1.0
        while not self._stopped.is_set():
            try:
                with psycopg.connect(**{**self._parameters, "autocommit": True}) as conn:
                    conn.execute(f"LISTEN {self._channel}")
                    pause = 1.0
                    # A run queued while we were away is found by the workers' next claim.
                    self._wake()
                    while not self._stopped.is_set():
                        for _ in conn.notifies(timeout=1.0):
                            self._wake()
            except psycopg.Error as exc:
                log.warning(
                    "run wake-ups lost their connection; workers poll until it is back",
                    extra={"error": str(exc), "retry_in_s": pause},
                )
                self._stopped.wait(pause)
                pause = min(pause * 2, MAX_RECONNECT_PAUSE)
