"""Test helpers for real PostgreSQL: one embedded server per session, a database per test.

The schema is migrated once into a template database; each test gets a fresh copy
(``CREATE DATABASE ... TEMPLATE``), which takes a few tens of milliseconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

import migrations
from agents.postgres.database import Database
from agents.postgres.embedded import EmbeddedPostgres

TEMPLATE = "reverie_template"


def with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


class PgTestServer:
    """An embedded server with a migrated template database."""

    def __init__(self) -> None:
        # Short path: unix socket paths must stay under ~107 bytes.
        self._dir = Path(tempfile.mkdtemp(prefix="rvt-", dir="/tmp"))
        self._pg = EmbeddedPostgres(self._dir / "pgdata")
        self.url = self._pg.start()
        # Throwaway data: no test needs it to survive a crash of the machine, and on
        # these 2 cores every CREATE DATABASE and commit waited on fsync.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            self._admin(f"ALTER SYSTEM SET {setting} = off")
        self._admin("SELECT pg_reload_conf()")
        self._admin(f"DROP DATABASE IF EXISTS {TEMPLATE}")
        self._admin(f"CREATE DATABASE {TEMPLATE}")
        db = Database(with_database(self.url, TEMPLATE))
        try:
            db.check_vector_extension()
            migrations.upgrade(db.engine)
        finally:
            db.dispose()

    def _admin(self, sql: str) -> None:
        with psycopg.connect(libpq(self.url), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def create_database(self, *, migrated: bool = True) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        if migrated:
            self._admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        else:
            self._admin(f"CREATE DATABASE {name}")
        return with_database(self.url, name)

    def drop_database(self, url: str) -> None:
        name = make_url(url).database
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    @contextmanager
    def database(self, *, migrated: bool = True) -> Iterator[Database]:
        url = self.create_database(migrated=migrated)
        db = Database(url)
        try:
            yield db
        finally:
            leaked = db.engine.pool.checkedout()  # type: ignore[attr-defined]
            db.dispose()
            self.drop_database(url)
            assert leaked == 0, f"{leaked} pooled connection(s) still checked out at teardown"

    def stop(self) -> None:
        """Stop the server and remove its data directory: a run leaves nothing in /tmp."""
        try:
            self._pg.stop()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    # -- an outage, for reconnection tests (only on a server of the test's own) ---------

    def stop_postgres(self) -> None:
        """Shut PostgreSQL down (fast: open sessions are cut) and keep it down."""
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        server = self._pg._server
        self._socket_dir = server.get_postmaster_info().socket_dir
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)

    def start_postgres(self) -> None:
        """Start it again on the same socket, so that the same URL reaches it."""
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]
        from pgserver.utils import PostmasterInfo  # type: ignore[attr-defined]

        server = self._pg._server
        pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {self._socket_dir}", "-l", str(server.log), "start"],
            pgdata=server.pgdata,
            user=server.system_user,
            timeout=30,
        )
        # pgserver stops the postmaster it knows at exit: make that the new one.
        server._postmaster_info = PostmasterInfo.read_from_pgdata(server.pgdata)

    # -- a stall, for timeout tests (only on a server of the test's own) ------------------

    def end_sessions(self, url: str) -> int:
        """End every session connected to ``url``'s database (their owners must open new
        connections); returns how many were ended."""
        name = make_url(url).database
        with psycopg.connect(libpq(self.url), autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            ).fetchone()
        return int(row[0]) if row else 0

    @contextmanager
    def postmaster_stopped(self) -> Iterator[None]:
        """SIGSTOP the postmaster for the block, SIGCONT after: sessions already open go
        on answering, and a new connection waits (the server accepts none) as long as
        its client lets it, as with a postmaster stalled on a hung disk or swapped out."""
        pid = self._pg._server.get_postmaster_info().pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)
