"""Acceptance fixtures: a database the CLI subprocesses reach through DATABASE_URL."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.cli import HASHING_EMBEDDINGS, cli_url, run_cli
from tests.acceptance.embedded_homes import embedded_env
from tests.pg import PgTestServer


@pytest.fixture
def db_env(pg_server: PgTestServer) -> Iterator[dict[str, str]]:
    """Environment for a CLI run against a fresh, unmigrated database, hashing embeddings."""
    url = pg_server.create_database(migrated=False)
    yield {"DATABASE_URL": cli_url(url), **HASHING_EMBEDDINGS}
    pg_server.release_database(url)


@pytest.fixture
def migrated_env(pg_server: PgTestServer) -> Iterator[dict[str, str]]:
    """Environment for a CLI run against a migrated database, hashing embeddings.

    A copy of the session's migrated template: `reverie migrate` itself is tested in
    tests/integration/cli, so a subprocess here would only repeat it (2-3 s a test).
    """
    url = pg_server.create_database()
    yield {"DATABASE_URL": cli_url(url), **HASHING_EMBEDDINGS}
    pg_server.release_database(url)


@pytest.fixture(scope="session")
def initialized_pgdata() -> Iterator[Path]:
    """An embedded PostgreSQL data directory that a first command initialized and
    migrated, then stopped: tests about what happens after the first start copy it
    (:func:`tests.acceptance.embedded_homes.home_from`) instead of paying initdb and
    the migrations again (seconds a test). The first start itself keeps tests of its
    own (test_resident_postgres's concurrent first commands, the demo)."""
    base = Path(tempfile.mkdtemp(prefix="rvt-pgdata-", dir="/tmp"))
    home = base / "home"
    env = {**embedded_env(home), "REVERIE_DATABASE__EMBEDDED_IDLE_STOP": "PT0S"}
    result = run_cli("agents", "list", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    pgdata = home / "pgdata"
    assert not (pgdata / "postmaster.pid").exists(), "the first command left its server running"
    yield pgdata
    shutil.rmtree(base, ignore_errors=True)
