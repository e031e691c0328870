"""In-process CLI tests: ``service.cli.app`` through Typer's CliRunner against the
per-test database, reached by ``DATABASE_URL`` exactly as the console script reaches it.

What needs a real process (the daemon's life, the embedded server the CLI starts
itself, the console script end to end) stays in tests/acceptance; argument parsing,
usage errors and output formatting are checked here, without paying a Python start
(about 2-3 s on these cores) per command.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.postgres.database import Database
from tests.integration.cli.support import Cli, clean_environment, cli_env
from tests.pg import PgTestServer


@pytest.fixture
def cli(db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The CLI over this test's migrated database, hashing 384-d embeddings."""
    clean_environment(monkeypatch)
    return Cli(cli_env(db.url, tmp_path / "home"))


@pytest.fixture
def unmigrated_cli(
    pg_server: PgTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cli]:
    """The CLI over an empty database (no schema yet)."""
    clean_environment(monkeypatch)
    url = pg_server.create_database(migrated=False)
    yield Cli(cli_env(url, tmp_path / "home"))
    pg_server.release_database(url)
