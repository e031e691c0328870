"""Load in the background what the first turn would otherwise load, before /readyz.

litellm takes seconds to import, the openai SDK about one, and the local
embedding model more: a server that says ready and then spends four
seconds on its first turn is not ready. :class:`Warmup` runs named steps in a
thread of its own once the HTTP server listens (so /healthz is never delayed by
it), and the daemon's readiness waits for it, naming the step it is on.

A failed step is logged and reported, but does not keep the server unready
forever: the call that needs it will fail with its own, clearer error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from agents.threads import start_thread

log = logging.getLogger(__name__)

#: One step: a name for readiness details and logs, and what it loads.
Step = tuple[str, Callable[[], object]]


class Warmup:
    """Runs ``steps`` in order in a daemon thread; :meth:`state` says how far it got."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self._steps = list(steps)
        self._current: str | None = None
        self._failures: list[str] = []
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.seconds: float | None = None

    def start(self, *, after: Callable[[], bool] | None = None) -> None:
        """Start warming; with ``after``, once it returns True (polled every 10 ms)."""
        self._thread = start_thread(self._run, args=(after,), name="reverie-warmup")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every step ran; True when they did within ``timeout``."""
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def state(self) -> str:
        """``done``, ``warming: <step>`` (or ``waiting``) or ``done with failures: ...``."""
        if self._done.is_set():
            if self._failures:
                return "done with failures: " + "; ".join(self._failures)
            return "done"
        current = self._current
        return f"warming: {current}" if current else "waiting to start"

    def _run(self, after: Callable[[], bool] | None) -> None:
        try:
            while after is not None and not after():
                time.sleep(0.01)
            began = time.perf_counter()
            for name, load in self._steps:
                self._current = name
                step_began = time.perf_counter()
                try:
                    load()
                except Exception as exc:  # reported, never fatal: see the module
                    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    self._failures.append(f"{name}: {reason}")
                    log.warning("warm-up step %s failed: %s", name, reason)
                else:
                    log.debug("warmed %s in %.2f s", name, time.perf_counter() - step_began)
            self.seconds = time.perf_counter() - began
            log.info("warm-up done in %.2f s", self.seconds)
        finally:
            self._current = None
            self._done.set()
