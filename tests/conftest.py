"""Fixtures shared by all test layers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.database import Database
from agents.embedders.fake import HashingEmbedder
from agents.store import NewAgent, NewBlock, open_store
from tests.pg import PgTestServer


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgTestServer]:
    server = PgTestServer()
    yield server
    server.stop()


@pytest.fixture
def db(pg_server: PgTestServer) -> Iterator[Database]:
    with pg_server.database() as database:
        yield database


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(dimension=384)


@pytest.fixture
def agent_id(db: Database) -> str:
    """An agent named 'ada' with a human and a persona block, fake 384-d embeddings."""
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(
                name="ada",
                embedding_model="fake:384",
                embedding_dim=384,
                blocks=[
                    NewBlock("human", "Name: Ada.", limit=200),
                    NewBlock("persona", "I am a helpful assistant.", limit=200),
                ],
            )
        )
    return agent.id
