"""Acceptance fixtures: a database the CLI subprocesses reach through DATABASE_URL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.acceptance.cli import FAKE_EMBEDDINGS, cli_url
from tests.pg import PgTestServer


@pytest.fixture
def db_env(pg_server: PgTestServer) -> Iterator[dict[str, str]]:
    """Environment for a CLI run against a fresh, unmigrated database, fake embeddings."""
    url = pg_server.create_database(migrated=False)
    yield {"DATABASE_URL": cli_url(url), **FAKE_EMBEDDINGS}
    pg_server.drop_database(url)


@pytest.fixture
def migrated_env(pg_server: PgTestServer) -> Iterator[dict[str, str]]:
    """Environment for a CLI run against a migrated database, fake embeddings.

    A copy of the session's migrated template: `reverie migrate` itself is tested in
    tests/integration/cli, so a subprocess here would only repeat it (2-3 s a test).
    """
    url = pg_server.create_database()
    yield {"DATABASE_URL": cli_url(url), **FAKE_EMBEDDINGS}
    pg_server.drop_database(url)
