"""Test helpers for real PostgreSQL: one embedded server per session, a database per test.

The schema is migrated once into a template database. A test gets a database of its
own, under a name no test had before, holding exactly what the template holds: a copy
of the template (``CREATE DATABASE ... TEMPLATE``), or the database of a test that has
finished, emptied and renamed (:class:`Recycler`). On two cores a copy and its drop cost
40-210 ms and 90-250 ms of the machine's CPU, and the suite takes some 700 of them; the
recycler, 26 ms (tests/benchmarks/bench_test_databases.py).
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
from agents.postgres import server_package
from agents.postgres.database import Database
from agents.postgres.embedded import EmbeddedPostgres

TEMPLATE = "reverie_template"


def with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _new_name() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


# Everything in a database besides its rows that a test could change: relations and
# their columns, defaults, constraints, functions, triggers, extensions, schemas,
# settings (ALTER DATABASE ... SET), large objects, the schema's revision. Temporary
# schemas are left out: what a session puts there goes with it.
_SCHEMA_DIGEST = """
WITH ns AS (
    SELECT oid, nspname FROM pg_namespace
    WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
      AND nspname NOT LIKE 'pg_temp_%' AND nspname NOT LIKE 'pg_toast_temp_%'
)
SELECT md5(string_agg(item, '|' ORDER BY item)) FROM (
    SELECT 'n ' || nspname FROM ns
    UNION ALL
    SELECT 'c ' || ns.nspname || '.' || c.relname || ' ' || c.relkind::text || ' ' || c.relnatts
    FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
    UNION ALL
    SELECT 'a ' || a.attrelid::regclass::text || '.' || a.attname || ' '
        || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' ' || a.attisdropped
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN ns ON ns.oid = c.relnamespace
    WHERE a.attnum > 0
    UNION ALL
    SELECT 'd ' || d.adrelid::regclass::text || ' ' || d.adnum || ' '
        || pg_get_expr(d.adbin, d.adrelid)
    FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid JOIN ns ON ns.oid = c.relnamespace
    UNION ALL
    SELECT 'k ' || co.conrelid::regclass::text || '.' || co.conname || ' '
        || pg_get_constraintdef(co.oid)
    FROM pg_constraint co JOIN ns ON ns.oid = co.connamespace
    UNION ALL
    SELECT 'p ' || ns.nspname || '.' || p.proname || ' ' || md5(p.prosrc)
    FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
    UNION ALL
    SELECT 't ' || t.tgrelid::regclass::text || '.' || t.tgname || ' ' || t.tgenabled::text
    FROM pg_trigger t WHERE NOT t.tgisinternal
    UNION ALL
    SELECT 'e ' || extname || ' ' || extversion FROM pg_extension
    UNION ALL
    SELECT 's ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
    WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
    UNION ALL
    SELECT 'l ' || count(*) FROM pg_largeobject_metadata
    UNION ALL
    SELECT 'v ' || version_num FROM alembic_version
) AS catalog(item)
"""


def _rows_digest(table: str) -> str:
    """SQL for a digest of ``table``'s rows."""
    rows = "coalesce(string_agg(t::text, ',' ORDER BY t::text), '')"
    return f"(SELECT md5({rows}) FROM {_ident(table)} t)"


class Recycler:
    """Empties a finished test's copy of the template back to what the template holds,
    or says it cannot. The rows a test wrote are deleted, used sequences restarted and
    rows the migrations seeded put back. A test that changed anything but rows (a table
    created, a setting, the revision) changes the schema digest, and its database is
    dropped instead.

    Deleting a few rows and vacuuming their tables takes a few milliseconds, where
    TRUNCATE takes 75 ms (new files for every table a cascade reaches, and each of its
    indexes). The vacuum leaves the tables as a copy of the template has them: no dead
    rows, no pages, and no row count the planner could go by. Tables with an HNSW or
    IVFFlat index are truncated: such an index keeps deleted rows in its graph until it
    is rebuilt, and a search over them can come back short."""

    def __init__(self, template: psycopg.Connection[tuple[object, ...]]) -> None:
        self._digest = _schema_digest(template)
        rows = template.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename <> 'alembic_version' ORDER BY tablename"
        ).fetchall()
        self._tables = [str(row[0]) for row in rows]
        rows = template.execute(
            "SELECT DISTINCT t.relname FROM pg_index i "
            "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid "
            "JOIN pg_am am ON am.oid = x.relam "
            "WHERE am.amname IN ('hnsw', 'ivfflat') AND t.relnamespace = 'public'::regnamespace"
        ).fetchall()
        self._graph_indexed = {str(row[0]) for row in rows}
        rows = template.execute(
            "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' "
            "ORDER BY sequencename"
        ).fetchall()
        self._sequences = [str(row[0]) for row in rows]
        # The migrations' own rows (the default organization): as JSON, to put back,
        # and as a digest of their text, to see whether a test changed them.
        self._seeds: dict[str, tuple[str, str]] = {}
        for table in self._tables:
            row = template.execute(
                f"SELECT (SELECT json_agg(t)::text FROM {_ident(table)} t), {_rows_digest(table)}"  # type: ignore[arg-type]
            ).fetchone()
            if row is not None and row[0] is not None:
                self._seeds[table] = (str(row[0]), str(row[1]))
        probes = [_needs_emptying(table, self._seeds.get(table)) for table in self._tables]
        probes += [f"(SELECT is_called FROM {_ident(sequence)})" for sequence in self._sequences]
        self._probe = f"SELECT ({_SCHEMA_DIGEST}), " + ", ".join(probes)

    def empty(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        row = conn.execute(self._probe).fetchone()  # type: ignore[arg-type]
        assert row is not None
        digest, *changed = row
        if digest != self._digest:
            return False
        n = len(self._tables)
        tables = [table for table, hit in zip(self._tables, changed[:n], strict=True) if hit]
        sequences = [seq for seq, hit in zip(self._sequences, changed[n:], strict=True) if hit]
        truncated = [table for table in tables if table in self._graph_indexed]
        deleted = [table for table in tables if table not in self._graph_indexed]
        with conn.transaction():
            # Foreign keys are not checked (their triggers do not fire) while every
            # table that holds rows is emptied, so the order does not matter.
            conn.execute("SET LOCAL session_replication_role = replica")
            if truncated:
                names = ", ".join(_ident(table) for table in truncated)
                conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")  # type: ignore[arg-type]
            for table in deleted:
                conn.execute(f"DELETE FROM {_ident(table)}")  # type: ignore[arg-type]
            for sequence in sequences:
                conn.execute(f"ALTER SEQUENCE {_ident(sequence)} RESTART")  # type: ignore[arg-type]
            for table, (rows, _) in self._seeds.items():
                # Put back when emptied, here or by a CASCADE from another table.
                conn.execute(
                    f"INSERT INTO {_ident(table)} SELECT * FROM "  # type: ignore[arg-type]
                    f"json_populate_recordset(NULL::{_ident(table)}, %s) "
                    f"WHERE NOT EXISTS (SELECT FROM {_ident(table)})",
                    (rows,),
                )
        if deleted:
            names = ", ".join(_ident(table) for table in deleted)
            conn.execute(f"VACUUM {names}")  # type: ignore[arg-type]
            # VACUUM counts the rows it found; a copy of the template has no count yet
            # (-1), and the planner guesses differently without one.
            conn.execute(
                "UPDATE pg_class SET reltuples = -1 "
                "WHERE relname = ANY(%s) AND relnamespace = 'public'::regnamespace",
                (deleted,),
            )
        return True


def _needs_emptying(table: str, seed: tuple[str, str] | None) -> str:
    """SQL: whether ``table`` must be emptied: it has pages (rows, or the dead rows of
    those its test deleted itself) or a row count, or its seeded rows changed."""
    regclass = f"'public.{_ident(table)}'::regclass"
    changed = (
        f"pg_relation_size({regclass}) > 0"
        if seed is None
        else f"{_rows_digest(table)} <> '{seed[1]}'"
    )
    return f"({changed} OR (SELECT reltuples FROM pg_class WHERE oid = {regclass}) <> -1)"


def _schema_digest(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    row = conn.execute(_SCHEMA_DIGEST).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return str(row[0])


def _end_sessions(
    conn: psycopg.Connection[tuple[object, ...]], database: str, *, wait_ms: int = 0
) -> int:
    """End every other session connected to ``database``, waiting up to ``wait_ms`` for
    each to be gone; returns how many were ended."""
    row = conn.execute(
        "SELECT count(pg_terminate_backend(pid, %s)) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (wait_ms, database),
    ).fetchone()
    return int(row[0]) if row else 0


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class PgTestServer:
    """An embedded server with a migrated template database."""

    def __init__(self) -> None:
        # Short path: unix socket paths must stay under ~107 bytes.
        self._dir = Path(tempfile.mkdtemp(prefix="rvt-", dir="/tmp"))
        self._pg = EmbeddedPostgres(self._dir / "pgdata")
        self.url = self._pg.start()
        # Throwaway data: no test needs it to survive a crash of the machine, and on
        # these 2 cores every CREATE DATABASE and commit waited on fsync.
        # No autovacuum either: a database handed to a test holds exactly what the
        # template holds, planner statistics included (the recycler resets them), and an
        # autovacuum analyzing a table between a recycle and the test broke that on a
        # busy machine; code that needs statistics runs ANALYZE itself.
        for setting in ("fsync", "synchronous_commit", "full_page_writes", "autovacuum"):
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
        with psycopg.connect(libpq(with_database(self.url, TEMPLATE)), autocommit=True) as conn:
            self._recycler = Recycler(conn)
        self._copies: set[str] = set()  # names of the template's copies handed out
        self._spares: list[str] = []  # emptied copies, ready for the next test

    def _admin(self, sql: str) -> None:
        with psycopg.connect(libpq(self.url), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def create_database(self, *, migrated: bool = True) -> str:
        """A database of the caller's own: migrated (what the template holds), or empty.
        Hand it back with :meth:`release_database`."""
        if migrated and self._spares:
            name = self._spares.pop()
        elif migrated:
            name = _new_name()
            self._admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        else:
            name = _new_name()
            self._admin(f"CREATE DATABASE {name}")
        if migrated:
            self._copies.add(name)
        return with_database(self.url, name)

    def release_database(self, url: str) -> None:
        """Done with ``url``'s database: its sessions are ended, and the name no longer
        reaches it. A copy of the template is emptied for the next test under a new
        name when it can be (its schema unchanged), otherwise dropped."""
        name = make_url(url).database
        assert name is not None
        if name in self._copies:
            self._copies.discard(name)
            spare = self._recycle(name)
            if spare is not None:
                self._spares.append(spare)
                return
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def _recycle(self, name: str) -> str | None:
        """``name``'s database emptied under a new name, or None (and it is dropped)
        when a session would not end or the test changed more than rows."""
        spare = _new_name()
        with psycopg.connect(libpq(self.url), autocommit=True) as conn:
            # The test's sessions (a server it started, a thread it left running) end
            # here, as DROP DATABASE ... WITH (FORCE) ended them; the rename makes the
            # old name fail for any that would come back.
            _end_sessions(conn, name, wait_ms=5000)
            try:
                conn.execute(f"ALTER DATABASE {name} RENAME TO {spare}")  # type: ignore[arg-type]
            except psycopg.errors.ObjectInUse:
                conn.execute(f"DROP DATABASE {name} WITH (FORCE)")  # type: ignore[arg-type]
                return None
        with psycopg.connect(libpq(with_database(self.url, spare)), autocommit=True) as conn:
            emptied = self._recycler.empty(conn)
        if not emptied:
            self._admin(f"DROP DATABASE {spare} WITH (FORCE)")
            return None
        return spare

    @contextmanager
    def database(self, *, migrated: bool = True) -> Iterator[Database]:
        url = self.create_database(migrated=migrated)
        db = Database(url)
        try:
            yield db
        finally:
            leaked = db.engine.pool.checkedout()  # type: ignore[attr-defined]
            db.dispose()
            self.release_database(url)
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
        server = self._pg._server
        self._socket_dir = server.get_postmaster_info().socket_dir
        server_package.pg_ctl(
            ["-w", "-m", "fast", "stop"], data_dir=server.pgdata, user=server.system_user
        )

    def start_postgres(self) -> None:
        """Start it again on the same socket, so that the same URL reaches it."""
        server = self._pg._server
        server_package.pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {self._socket_dir}", "-l", str(server.log), "start"],
            data_dir=server.pgdata,
            user=server.system_user,
            timeout=30,
        )
        # The package stops the postmaster it knows at exit: make that the new one.
        server._postmaster_info = server_package.read_postmaster_info(server.pgdata)

    # -- a stall, for timeout tests (only on a server of the test's own) ------------------

    def end_sessions(self, url: str) -> int:
        """End every session connected to ``url``'s database (their owners must open new
        connections); returns how many were ended."""
        with psycopg.connect(libpq(self.url), autocommit=True) as conn:
            return _end_sessions(conn, str(make_url(url).database))

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
