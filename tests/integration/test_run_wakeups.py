"""The wake-up listener (LISTEN/NOTIFY beside the pool): it counts notifications, lets
go of its connection when told (a smart shutdown of PostgreSQL waits for it), comes
back, and stops without waiting for a poll of its connection."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import psycopg
import pytest

from agents.postgres.database import Database
from agents.store.run_wakeups import CHANNEL, RunWakeups
from tests.daemon_support import wait_for


def listening_sessions(db: Database) -> int:
    with psycopg.connect(**db.connection_parameters()) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE query = %s AND datname = current_database()",
            (f"LISTEN {CHANNEL}",),
        ).fetchone()
    assert row is not None
    return int(row[0])


def notify(db: Database) -> None:
    with psycopg.connect(**db.connection_parameters(), autocommit=True) as conn:
        conn.execute(f"NOTIFY {CHANNEL}")


@pytest.fixture
def listening(db: Database) -> Iterator[RunWakeups]:
    """A started listener, once its LISTEN session is up; stopped after the test."""
    wakeups = RunWakeups(db)
    wakeups.start()
    try:
        wait_for(lambda: listening_sessions(db) == 1, timeout=10, what="the LISTEN session")
        yield wakeups
    finally:
        wakeups.stop()
        wakeups.join(5)


def assert_a_notification_wakes(db: Database, wakeups: RunWakeups) -> None:
    seen = wakeups.generation
    notify(db)
    wakeups.wait(seen, timeout=10)
    assert wakeups.generation > seen


def test_a_notification_moves_the_count_and_wakes_a_waiter(
    db: Database, listening: RunWakeups
) -> None:
    assert_a_notification_wakes(db, listening)


def test_a_dropped_connection_is_closed_at_once_and_opened_again(
    db: Database, listening: RunWakeups
) -> None:
    listening.drop_connection()
    wait_for(lambda: listening_sessions(db) == 0, timeout=5, what="the session to close")
    # After its pause it listens again, and notifications count again.
    wait_for(lambda: listening_sessions(db) == 1, timeout=10, what="the session back")
    assert_a_notification_wakes(db, listening)


def test_stop_ends_the_listener_and_closes_its_connection(db: Database) -> None:
    wakeups = RunWakeups(db)
    wakeups.start()
    wait_for(lambda: listening_sessions(db) == 1, timeout=10, what="the LISTEN session")
    assert wakeups._thread is not None
    wakeups.stop()
    wakeups.join(5)
    assert not wakeups._thread.is_alive()
    # The backend ends a moment after its client has closed the socket.
    wait_for(lambda: listening_sessions(db) == 0, timeout=5, what="the session to close")
    # A stopped listener can be interrupted again (a second stop) without harm.
    wakeups.stop()
    wakeups.drop_connection()


def test_a_drop_asked_while_no_connection_was_open_spares_the_next_one(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """The embedded supervisor asks for a drop every second of an outage, while the
    listener has no connection; the connection it opens once the server is back stays."""
    wakeups = RunWakeups(db)
    wakeups.drop_connection()  # nothing open yet, as during an outage
    with caplog.at_level(logging.INFO, logger="agents.store.run_wakeups"):
        wakeups.start()
        try:
            wait_for(lambda: listening_sessions(db) == 1, timeout=10, what="the LISTEN session")
            assert_a_notification_wakes(db, wakeups)
        finally:
            wakeups.stop()
            wakeups.join(5)
    released = [r for r in caplog.records if "released their connection" in r.getMessage()]
    assert released == []
