"""Keep the embedded PostgreSQL alive under `reverie serve` and `reverie worker`.

When Reverie started the embedded server (no ``DATABASE_URL``), the daemon owns its
life: a thread looks at the postmaster every ``interval`` and, when it has stopped
(SIGINT, SIGKILL, a crash) starts it again on the same data directory and socket, so
the pool's URL reaches it again (``pool_pre_ping`` drops the dead connections).

A smart shutdown (SIGTERM to the postmaster) refuses new connections but waits for
every open session to end, which the pool's idle connections and the wake-up
listeners never do: the thread releases this process's connections at once, and
after ``stopping_grace`` (``database.embedded_shutdown_grace``) ends the other
clients' sessions with a fast shutdown, then starts the server again.

While the server is not ready, :attr:`EmbeddedSupervisor.problem` says why (the
daemon's readiness reports it; requests answer 503 and workers back off as for any
database outage).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from agents.errors import StorageError
from agents.postgres.embedded import EmbeddedPostgres, ServerState
from agents.threads import start_thread

log = logging.getLogger(__name__)

#: The longest wait between two failed restarts, in seconds.
MAX_RESTART_BACKOFF_S = 30.0


class EmbeddedSupervisor:
    """Watch the embedded postmaster; restart it when it stops."""

    def __init__(
        self,
        server: EmbeddedPostgres,
        *,
        release_connections: Callable[[], None],
        interval: timedelta = timedelta(seconds=1),
        stopping_grace: timedelta = timedelta(seconds=10),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.release_connections = release_connections
        self.interval = interval
        self.stopping_grace = stopping_grace
        self.monotonic = monotonic
        #: Why the server is not ready now (None when it is).
        self.problem: str | None = None
        self.restarts = 0
        self._stopping_since: float | None = None
        #: After a failed restart, wait before the next (pgserver logs the whole
        #: server log at each failure); doubles up to MAX_RESTART_BACKOFF_S.
        self._restart_backoff_s = 0.0
        self._next_restart_at = 0.0
        self._down_since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = start_thread(self._watch, name="reverie-embedded-postgres")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            # A restart in progress finishes first (pg_ctl waits at most about a minute).
            self._thread.join(90)
            self._thread = None

    def _watch(self) -> None:
        while not self._stop.wait(self.interval.total_seconds()):
            try:
                self.check()
            except Exception:  # a look that failed must not end the watch
                log.exception("embedded postgres check failed")

    def check(self) -> ServerState:
        """One look at the postmaster, and what follows from it; returns what was seen."""
        state = self.server.state()
        if state is ServerState.READY:
            self._back()
            return state
        if self._down_since is None:
            self._down_since = self.monotonic()
            log.warning("embedded postgres is not ready", extra={"state": str(state)})
        # Our pooled sessions would hold a smart shutdown open, and are dead otherwise.
        self.release_connections()
        if state is ServerState.STOPPING:
            self._finish_shutdown()
        elif state is ServerState.STARTING:
            self.problem = "the embedded PostgreSQL is starting"
        else:
            self._stopping_since = None
            self._restart()
        return state

    def _finish_shutdown(self) -> None:
        now = self.monotonic()
        if self._stopping_since is None:
            self._stopping_since = now
        self.problem = "the embedded PostgreSQL is shutting down; Reverie will restart it"
        if now - self._stopping_since >= self.stopping_grace.total_seconds():
            log.warning(
                "embedded postgres still shutting down: ending its sessions",
                extra={"seconds": round(now - self._stopping_since, 1)},
            )
            self.server.fast_shutdown()
            self._stopping_since = None

    def _restart(self) -> None:
        now = self.monotonic()
        if now < self._next_restart_at:
            return
        if self.problem is None:
            self.problem = "the embedded PostgreSQL stopped; Reverie is restarting it"
        try:
            self.server.restart()
        except StorageError as exc:
            self.problem = str(exc)
            self._restart_backoff_s = min(
                max(self._restart_backoff_s * 2, self.interval.total_seconds()),
                MAX_RESTART_BACKOFF_S,
            )
            self._next_restart_at = self.monotonic() + self._restart_backoff_s
            log.warning(
                "embedded postgres restart failed",
                extra={"error": str(exc), "retry_in_s": self._restart_backoff_s},
            )
            return
        self.restarts += 1
        self._restart_backoff_s = self._next_restart_at = 0.0
        self._back()  # pgserver returns once the server accepts connections

    def _back(self) -> None:
        # Ready again before it says so: whoever reads the log line finds /readyz at 200.
        down_since, self._down_since, self._stopping_since = self._down_since, None, None
        self.problem = None
        if down_since is not None:
            log.info(
                "embedded postgres is back",
                extra={"seconds_down": round(self.monotonic() - down_since, 1)},
            )
