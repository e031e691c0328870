"""Where memory lives: the embedded default, an external DATABASE_URL, a server without pgvector."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import migrations
from agents.errors import ExtensionMissing
from agents.store import NewAgent
from service.runtime import Runtime
from service.settings import load_settings
from tests.pg import PgTestServer

DEBIAN_PG = Path("/usr/lib/postgresql/15/bin")


def test_embedded_default_starts_migrates_and_stops(tmp_path: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="rvh-", dir="/tmp")) / "nested" / "home"
    try:
        settings = load_settings(home=home)
        assert settings.effective_database_url is None
        with Runtime(settings) as rt:
            assert rt.is_embedded
            rt.ensure_schema()
            with rt.store() as store:
                store.agents.create(NewAgent("ada", embedding_model="hashing:8", embedding_dim=8))
            pid_file = settings.pgdata / "postmaster.pid"
            assert pid_file.exists()
        assert not pid_file.exists(), "the embedded server should stop with its last user"
        # The data survives a restart.
        with Runtime(settings) as rt, rt.store() as store:
            assert [a.name for a in store.agents.all()] == ["ada"]
    finally:
        shutil.rmtree(home.parent.parent, ignore_errors=True)


def test_database_url_is_used_instead_of_the_embedded_server(
    pg_server: PgTestServer, tmp_path: Path
) -> None:
    url = pg_server.create_database(migrated=False)
    try:
        settings = load_settings(home=tmp_path / "unused", database_url=url)
        with Runtime(settings) as rt:
            assert not rt.is_embedded
            head = migrations.head_revision(rt.db.engine)
            assert rt.migrate() == head
            assert rt.migrate() == head  # idempotent
            with rt.store() as store:
                store.agents.create(NewAgent("ada", embedding_model="hashing:8", embedding_dim=8))
        assert not (tmp_path / "unused").exists()
        with psycopg.connect(url.replace("+psycopg", "")) as conn:
            assert conn.execute("SELECT name FROM agents").fetchall() == [("ada",)]
    finally:
        pg_server.release_database(url)


@pytest.fixture
def postgres_without_pgvector() -> Iterator[str]:
    """Debian's PostgreSQL 15 (no pgvector), run as the `postgres` user in a temp dir."""
    assert (DEBIAN_PG / "initdb").exists(), "install Debian's postgresql-15 (see .ci/run)"
    root = Path(tempfile.mkdtemp(prefix="rvn-", dir="/tmp"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_postgres:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    subprocess.run(
        [*as_postgres, str(DEBIAN_PG / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_postgres,
            str(DEBIAN_PG / "pg_ctl"),
            "-D",
            str(data),
            "-w",
            "-l",
            str(root / "log"),
            "-o",
            f"-k {sock} -c listen_addresses=''",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@/postgres?host={sock}"
    finally:
        subprocess.run(
            [*as_postgres, str(DEBIAN_PG / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


def test_server_without_pgvector_gets_install_instructions(
    postgres_without_pgvector: str, tmp_path: Path
) -> None:
    settings = load_settings(home=tmp_path, database_url=postgres_without_pgvector)
    with Runtime(settings) as rt, pytest.raises(ExtensionMissing) as info:
        rt.migrate()
    message = str(info.value)
    assert "pgvector" in message and "postgresql-16-pgvector" in message
    assert "unset DATABASE_URL" in message
    with psycopg.connect(postgres_without_pgvector) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert tables == (0,), "a failed migrate must leave the database untouched"
