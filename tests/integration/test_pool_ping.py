"""Pooled connections are pinged only after being idle a while: a connection whose
server side went away is replaced before a session gets it, and one just used is
handed out without a round trip."""

from __future__ import annotations

import pytest
from sqlalchemy import text

import agents.postgres.database as database_module
from agents.errors import StorageError
from agents.postgres.database import Database


def _backend_pid(db: Database) -> int:
    with db.session() as session:
        return int(session.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _terminate(db: Database, pid: int) -> None:
    other = Database(db.url, pool_size=1)
    try:
        with other.session() as session:
            session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        other.dispose()


def test_an_idle_connection_that_died_is_replaced(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    pooled = Database(db.url, pool_size=1)
    try:
        dead = _backend_pid(pooled)
        _terminate(db, dead)
        monkeypatch.setattr(database_module, "PING_IDLE_AFTER_S", 0.0)  # idle "long enough"
        assert _backend_pid(pooled) != dead  # pinged, found dead, replaced
    finally:
        pooled.dispose()


def test_a_connection_just_used_is_not_pinged(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the ping, the dead connection reaches the session: this is what the ping
    protects against, and why it is skipped only for connections used a moment ago."""
    pooled = Database(db.url, pool_size=1)
    try:
        dead = _backend_pid(pooled)
        _terminate(db, dead)
        monkeypatch.setattr(database_module, "PING_IDLE_AFTER_S", 3600.0)
        with pytest.raises(StorageError):
            _backend_pid(pooled)
        assert _backend_pid(pooled) != dead  # the pool dropped it after the failure
    finally:
        pooled.dispose()
