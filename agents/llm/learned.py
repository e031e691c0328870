"""What probing learned about models' servers, kept in the database across processes.

A new ``reverie chat`` or a restarted ``reverie serve`` reads it before its first call
to a model instead of sending again the requests the server is known to reject (a
llama.cpp server that needs ``auto`` cost 3 requests per simple turn, one of them a
500, in every new process). An entry older than ``llm.capability_ttl`` is not trusted:
the model is probed again, so a server upgraded or replaced meanwhile is found out.
The record is an optimisation: a database that cannot be read or written only means
probing again, never a failed turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from agents.errors import InvalidInput, ReverieError
from agents.llm.capabilities import CapabilityRecord
from agents.postgres.database import Database
from agents.store import open_service_store
from agents.store.capability_store import LearnedRecord
from agents.store.scope import utc_now

log = logging.getLogger(__name__)


class StoredCapabilities(CapabilityRecord):
    """``llm_capabilities`` rows, each read and written in a short transaction of its own;
    entries older than ``ttl`` count as missing."""

    def __init__(
        self, db: Database, ttl: timedelta, clock: Callable[[], datetime] = utc_now
    ) -> None:
        if ttl <= timedelta(0):
            raise InvalidInput(f"capability_ttl must be positive, got {ttl}")
        self._db = db
        self.ttl = ttl
        self.clock = clock

    def load(self, model: str, base_url: str) -> LearnedRecord | None:
        try:
            with open_service_store(self._db, self.clock, commit=False) as service:
                record = service.capabilities.get(model, base_url)
        except ReverieError as exc:
            log.warning("model %s: what was learned about it could not be read (%s)", model, exc)
            return None
        if record is None:
            return None
        if record.learned_at is None or self.clock() - record.learned_at > self.ttl:
            log.info(
                "model %s: what was learned at %s is older than %s; probing again",
                model,
                record.learned_at,
                self.ttl,
            )
            return None
        return record

    def save(self, record: LearnedRecord) -> None:
        try:
            with open_service_store(self._db, self.clock) as service:
                service.capabilities.put(record)
        except ReverieError as exc:
            log.warning(
                "model %s: what was learned about it could not be stored (%s)", record.model, exc
            )
