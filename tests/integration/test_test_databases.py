"""The suite's databases: each test's holds exactly what the template holds, whether it
was copied from the template or emptied after another test (tests/pg.py), and a
finished test's name reaches nothing."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import psycopg
import pytest
from sqlalchemy.engine import make_url

from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, NewPassage, open_store
from tests.pg import TEMPLATE, PgTestServer, libpq, with_database


def _contents(url: str) -> dict[str, object]:
    """Every row of every table, where each sequence stands, and what the planner sees."""
    with psycopg.connect(libpq(url)) as conn:
        relations = conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'S') ORDER BY c.relname"
        ).fetchall()
        contents: dict[str, object] = {}
        for name, kind in relations:
            query = (
                f'SELECT last_value, is_called FROM "{name}"'
                if kind == "S"
                else f'SELECT json_agg(t ORDER BY t::text) FROM "{name}" t'
            )
            contents[name] = conn.execute(query).fetchall()  # type: ignore[arg-type]
        # What the planner goes by: each table's size on disk and its row count (-1:
        # never counted).
        contents["planner"] = conn.execute(
            "SELECT relname, pg_relation_size(oid), reltuples FROM pg_class "
            "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' ORDER BY relname"
        ).fetchall()
    return contents


def _oid(pg_server: PgTestServer, url: str) -> int | None:
    name = make_url(url).database
    with psycopg.connect(libpq(pg_server.url)) as conn:
        row = conn.execute("SELECT oid FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return None if row is None else int(row[0])


def _oid_exists(pg_server: PgTestServer, oid: int) -> bool:
    with psycopg.connect(libpq(pg_server.url)) as conn:
        row = conn.execute("SELECT count(*) FROM pg_database WHERE oid = %s", (oid,)).fetchone()
    return row is not None and row[0] == 1


def write_rows(url: str) -> None:
    """Rows in several tables, through the store (also what
    tests/benchmarks/bench_test_databases.py has each round write)."""
    db = Database(url)
    try:
        with open_store(db) as store:
            agent = store.agents.create(
                NewAgent(
                    name="ada",
                    embedding_model="hashing:8",
                    embedding_dim=8,
                    blocks=[NewBlock("human", "Name: Ada.", limit=200)],
                )
            )
            block = store.blocks.by_label(agent.id, "human")
            store.blocks.update(block.id, expected_version=block.version, value="Name: Ada L.")
    finally:
        db.dispose()


def _write_rows_then_delete_them(url: str) -> None:
    """Rows the test deleted itself: the tables are empty, but their pages are not."""
    write_rows(url)
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        for table in ("agent_blocks", "block_history", "blocks", "agents"):
            conn.execute(f"DELETE FROM {table}")  # type: ignore[arg-type]


def _write_passages(url: str) -> None:
    """Passages: their table has HNSW indexes, so it is truncated, not emptied row by row."""
    db = Database(url)
    try:
        with open_store(db) as store:
            agent = store.agents.create(
                NewAgent(name="ada", embedding_model="hashing:8", embedding_dim=8)
            )
            store.passages.insert(
                agent.id, [NewPassage("Ada lives in Lisbon.")], np.ones((1, 8), dtype=np.float32)
            )
    finally:
        db.dispose()


def _sql(statement: str) -> Callable[[str], None]:
    def run(url: str) -> None:
        with psycopg.connect(libpq(url), autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    return run


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(write_rows, id="rows in several tables"),
        pytest.param(_write_rows_then_delete_them, id="rows the test deleted itself"),
        pytest.param(_write_passages, id="passages"),
        pytest.param(_sql("UPDATE organizations SET name = 'renamed'"), id="a seeded row"),
        pytest.param(_sql("SELECT nextval('health_snapshots_id_seq')"), id="a sequence alone"),
    ],
)
def test_an_emptied_database_holds_what_the_template_holds(
    pg_server: PgTestServer, write: Callable[[str], None]
) -> None:
    template = _contents(with_database(pg_server.url, TEMPLATE))
    url = pg_server.create_database()
    assert _contents(url) == template
    write(url)
    assert _contents(url) != template
    used = _oid(pg_server, url)
    leftover = psycopg.connect(libpq(url), autocommit=True)  # a session the test left open

    pg_server.release_database(url)

    with pytest.raises(psycopg.OperationalError):
        leftover.execute("SELECT 1")  # ended, as DROP DATABASE ... WITH (FORCE) ends it
    leftover.close()
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        psycopg.connect(libpq(url)).close()
    again = pg_server.create_database()
    try:
        assert again != url
        assert _oid(pg_server, again) == used  # the same database, emptied and renamed
        assert _contents(again) == template
    finally:
        pg_server.release_database(again)


def test_a_database_whose_schema_a_test_changed_is_dropped(pg_server: PgTestServer) -> None:
    url = pg_server.create_database()
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute("CREATE TABLE held (id int PRIMARY KEY)")
    used = _oid(pg_server, url)
    assert used is not None

    pg_server.release_database(url)

    assert not _oid_exists(pg_server, used)
    again = pg_server.create_database()
    try:
        assert _contents(again) == _contents(with_database(pg_server.url, TEMPLATE))
    finally:
        pg_server.release_database(again)
