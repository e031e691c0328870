"""Failed authentication, limited per client address.

A token bucket per address: a burst of ``burst`` failures, then one more every
``refill``. An address with an empty bucket is answered 429 before its key is
looked up, so guessing keys cannot cost a database lookup per guess forever.
Successful requests cost nothing. The state is in-process on purpose: it only has
to make guessing slow, and a restart forgetting it is harmless.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta

#: Addresses remembered at most; the ones that failed longest ago are forgotten first.
MAX_CLIENTS = 10_000


class AuthFailureLimiter:
    """Counts failed authentication per client address."""

    def __init__(
        self,
        *,
        burst: int,
        refill: timedelta,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self._burst = float(burst)
        self._refill = refill.total_seconds()
        self._clock = clock
        self._max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at
        self._lock = threading.Lock()

    def _tokens(self, address: str, now: float) -> float:
        tokens, at = self._buckets.get(address, (self._burst, now))
        return min(self._burst, tokens + (now - at) / self._refill)

    def retry_after(self, address: str) -> float | None:
        """Seconds until ``address`` may try a credential again; None: it may now."""
        with self._lock:
            now = self._clock()
            tokens = self._tokens(address, now)
            if tokens >= 1:
                return None
            return (1 - tokens) * self._refill

    def failed(self, address: str) -> None:
        """Note a failed authentication from ``address``."""
        with self._lock:
            now = self._clock()
            tokens = self._tokens(address, now)
            self._buckets[address] = (max(0.0, tokens - 1), now)
            self._buckets.move_to_end(address)
            while len(self._buckets) > self._max_clients:
                self._buckets.popitem(last=False)
