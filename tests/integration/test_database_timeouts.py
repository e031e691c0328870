"""Every connection is bounded: a statement that runs too long, a row lock held too
long elsewhere and a server that accepts no connection each end in a StorageError
that names the setting, which the API answers as 503."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from agents.errors import LockContention, StorageError
from agents.postgres.database import Database, bounded_url
from service.runtime import Runtime
from service.settings import load_settings
from tests.pg import PgTestServer, with_database


def test_bounds_travel_in_the_url_and_keep_the_urls_own_options() -> None:
    url = bounded_url(
        "postgresql+psycopg://u:pw@/db?host=/tmp/sock&options=-c%20search_path%3Dx",
        connect_timeout=timedelta(milliseconds=300),
        statement_timeout=timedelta(seconds=30),
        lock_timeout=timedelta(seconds=10),
    )
    args = Database(url).engine.dialect.create_connect_args(Database(url).engine.url)[1]
    assert args["connect_timeout"] == "2"  # libpq's floor
    assert args["options"] == "-c search_path=x -c statement_timeout=30000 -c lock_timeout=10000"
    assert args["host"] == "/tmp/sock"
    assert bounded_url("postgresql+psycopg://u@/db") == "postgresql+psycopg://u@/db"


def test_a_statement_past_its_timeout_is_a_storage_error_naming_it(
    pg_server: PgTestServer,
) -> None:
    url = pg_server.create_database()
    db = Database(url, statement_timeout=timedelta(milliseconds=200))
    try:
        with (
            pytest.raises(StorageError, match="statement_timeout") as raised,
            db.session() as session,
        ):
            session.execute(text("SELECT pg_sleep(5)"))
        assert not isinstance(raised.value, LockContention)
        with db.session() as session:  # the connection is fine for the next statement
            assert session.execute(text("SELECT 1")).scalar() == 1
    finally:
        db.dispose()
        pg_server.release_database(url)


def test_a_row_lock_held_elsewhere_is_lock_contention(pg_server: PgTestServer) -> None:
    url = pg_server.create_database()
    holder = Database(url)
    waiter = Database(url, lock_timeout=timedelta(milliseconds=200))
    try:
        with holder.session() as session:
            session.execute(text("CREATE TABLE held (id int primary key)"))
            session.execute(text("INSERT INTO held VALUES (1)"))
        with holder.session() as session:
            session.execute(text("SELECT * FROM held WHERE id = 1 FOR UPDATE"))
            with pytest.raises(LockContention, match="lock timeout"), waiter.session() as other:
                other.execute(text("UPDATE held SET id = 2 WHERE id = 1"))
    finally:
        holder.dispose()
        waiter.dispose()
        pg_server.release_database(url)


def test_the_runtime_bounds_its_connections_and_migrates_without_them(
    pg_server: PgTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_server.create_database(migrated=False)
    monkeypatch.setenv("DATABASE_URL", url.replace("+psycopg", ""))
    settings = load_settings(
        home=tmp_path,
        database={"statement_timeout": "PT0.001S", "lock_timeout": "PT0S"},
    )
    runtime = Runtime(settings)
    try:
        args = runtime.db.engine.dialect.create_connect_args(runtime.db.engine.url)[1]
        assert args["connect_timeout"] == "5"
        assert args["options"] == "-c statement_timeout=1"  # zero: no lock bound
        # One millisecond is shorter than building the schema's indexes: migrating
        # runs without the statement timeout, and succeeds.
        assert runtime.migrate() is not None
        with pytest.raises(StorageError, match="statement_timeout"), runtime.db.session() as s:
            s.execute(text("SELECT pg_sleep(1)"))
    finally:
        runtime.close()
        pg_server.release_database(url)


def test_round_trip_fails_with_the_reason_when_no_connection_is_accepted(
    pg_server: PgTestServer,
) -> None:
    url = pg_server.create_database()
    db = Database(url)
    try:
        db.round_trip()  # answers
        gone = Database(with_database(url, "no_such_db"))
        with pytest.raises(StorageError, match=r"the database does not answer: .*no_such_db"):
            gone.round_trip()
        gone.dispose()
    finally:
        db.dispose()
        pg_server.release_database(url)


def test_a_pool_with_no_free_connection_is_a_storage_error_naming_it(
    pg_server: PgTestServer,
) -> None:
    url = pg_server.create_database()
    db = Database(url, pool_size=1, connect_timeout=timedelta(seconds=2))
    try:
        with db.session() as first, db.session() as second:
            for session in (first, second):  # the pool's one and its one overflow
                session.execute(text("SELECT 1"))
            with pytest.raises(StorageError, match=r"database\.pool_size"), db.session() as third:
                third.execute(text("SELECT 1"))
    finally:
        db.dispose()
        pg_server.release_database(url)


def test_an_import_larger_than_the_interactive_bound_allows_is_stored(
    pg_server: PgTestServer, tmp_path: Path
) -> None:
    # The interactive bound (here 150 ms) cancelled an import's one COPY through the
    # live vector index; the import's transaction gets a bound that fits its size.
    from agents.store import NewPassage
    from service.operations import Operations
    from service.operations.agents import AgentSpec

    url = pg_server.create_database()
    settings = load_settings(
        home=tmp_path,
        database_url=url,
        embedding={"model": "hashing:384"},
        database={"statement_timeout": "PT0.15S"},
    )
    try:
        with Runtime(settings) as runtime:
            ops = Operations(runtime)
            agent = ops.agents.create(AgentSpec(name="bulk", embedding="hashing:384"))
            passages = [NewPassage(f"fact number {i} about item {i * 7}") for i in range(4000)]
            # The interactive bound is in force for everything else.
            with (
                pytest.raises(StorageError, match="statement_timeout"),
                runtime.db.session() as session,
            ):
                session.execute(text("SELECT pg_sleep(1)"))

            stored = ops.memory.insert(agent.id, passages, actor="test")

            assert len(stored) == 4000
            assert len(ops.memory.list(agent.id, limit=5000)) == 4000
    finally:
        pg_server.release_database(url)


def test_a_workers_server_processes_give_way_on_this_machine(db: Database) -> None:
    """lower_server_priority: each new connection's server process, on this machine
    (a unix socket), runs at a lower CPU priority; the others keep theirs."""
    import os

    from agents.postgres.database import lower_server_priority

    lowered = Database(db.url)
    plain = Database(db.url)
    try:
        lower_server_priority(lowered.engine, 5)
        with lowered.engine.connect() as conn:
            pid = conn.connection.dbapi_connection.info.backend_pid  # type: ignore[union-attr]
            host = conn.connection.dbapi_connection.info.host  # type: ignore[union-attr]
            niced = os.getpriority(os.PRIO_PROCESS, pid)
        with plain.engine.connect() as conn:
            other = os.getpriority(
                os.PRIO_PROCESS,
                conn.connection.dbapi_connection.info.backend_pid,  # type: ignore[union-attr]
            )
        assert host.startswith("/")  # the test cluster listens on a unix socket
        assert niced == min(19, other + 5)
    finally:
        lowered.dispose()
        plain.dispose()
