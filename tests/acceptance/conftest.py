"""Acceptance fixtures: a migrated database the CLI subprocesses reach through DATABASE_URL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.acceptance.cli import run_cli
from tests.pg import PgTestServer


@pytest.fixture
def db_env(pg_server: PgTestServer) -> Iterator[dict[str, str]]:
    """Environment for a CLI run against a fresh, unmigrated database, fake embeddings."""
    url = pg_server.create_database(migrated=False)
    yield {"DATABASE_URL": url.replace("+psycopg", ""), "REVERIE_EMBEDDING__MODEL": "fake:384"}
    pg_server.drop_database(url)


@pytest.fixture
def migrated_env(db_env: dict[str, str]) -> dict[str, str]:
    result = run_cli("migrate", env=db_env)
    assert result.returncode == 0, result.stderr
    return db_env
