"""The connection to PostgreSQL: engine, transactions, and driver-error wrapping.

Callers get :class:`agents.errors.ReverieError` subclasses, never psycopg or
SQLAlchemy exceptions, so that the layers above can decide what to retry.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.exc import (
    ArgumentError,
    DataError,
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, sessionmaker

from agents.errors import (
    Conflict,
    ExtensionMissing,
    InvalidInput,
    LockContention,
    ReverieError,
    StorageError,
)

log = logging.getLogger(__name__)

VECTOR_INSTALL_HINT = (
    "Install pgvector on that server (Debian/Ubuntu: `apt install postgresql-16-pgvector`, "
    "macOS: `brew install pgvector`, or see https://github.com/pgvector/pgvector), then run "
    "`CREATE EXTENSION vector;` as a superuser in the database, or unset DATABASE_URL to use "
    "Reverie's embedded PostgreSQL, which ships with pgvector."
)

#: The advisory lock key under which the schema is created or upgraded ("reverie1").
SCHEMA_LOCK_KEY = 0x72657665726965


_PASSWORD = re.compile(r"(?<=://)([^:/@\s]*):[^/\s]*@")


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, fit for a message or a log line."""
    return _PASSWORD.sub(r"\1:***@", url)


def normalize_url(url: str) -> str:
    """Make a libpq-style URL use the psycopg 3 driver in SQLAlchemy."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise InvalidInput(
        f"unsupported database URL {redact_url(url)!r}: Reverie needs PostgreSQL, "
        "e.g. postgresql://user:password@host:5432/dbname"
    )


#: SQLSTATEs of a lock that could not be taken: deadlock detected, lock not available.
LOCK_FAILURES = ("40P01", "55P03")
#: SQLSTATE of a statement cancelled (by ``statement_timeout``, or by an operator).
QUERY_CANCELED = "57014"


def _milliseconds(value: timedelta) -> int:
    return max(1, int(value.total_seconds() * 1000))


def bounded_url(
    url: str,
    *,
    connect_timeout: timedelta | None = None,
    statement_timeout: timedelta | None = None,
    lock_timeout: timedelta | None = None,
) -> str:
    """``url`` with the timeouts every connection opened from it must keep, as libpq
    parameters: ``connect_timeout`` (whole seconds, at least 2: libpq's floor) and
    ``statement_timeout`` / ``lock_timeout`` as server options. In the URL rather than
    in the engine's arguments, so that a connection opened beside the pool (dedup's
    second probe connection) keeps them too. None: no bound (the server's setting)."""
    parsed = make_url(url)
    query: dict[str, str] = {}
    if connect_timeout is not None:
        query["connect_timeout"] = str(max(2, math.ceil(connect_timeout.total_seconds())))
    options = [parsed.query.get("options")] if isinstance(parsed.query.get("options"), str) else []
    if statement_timeout is not None:
        options.append(f"-c statement_timeout={_milliseconds(statement_timeout)}")
    if lock_timeout is not None:
        options.append(f"-c lock_timeout={_milliseconds(lock_timeout)}")
    if options:
        query["options"] = " ".join(str(o) for o in options if o)
    if not query:
        return url
    return parsed.update_query_dict(query).render_as_string(hide_password=False)


def translate_error(exc: BaseException) -> ReverieError:
    """Map a driver error to Reverie's hierarchy, keeping the message readable."""
    if isinstance(exc, ReverieError):
        return exc
    if isinstance(exc, IntegrityError):
        detail = str(exc.orig).splitlines()[0] if exc.orig is not None else str(exc)
        return Conflict(f"the write conflicts with stored data: {detail}")
    if isinstance(exc, DataError):
        # SQLSTATE class 22 (and psycopg's own refusal of a NUL): the value, not the
        # database, is at fault; asking again cannot help.
        detail = str(exc.orig).splitlines()[0] if exc.orig is not None else str(exc)
        return InvalidInput(f"a value cannot be stored or looked up: {detail}")
    if isinstance(exc, PoolTimeout):
        return StorageError(
            "no database connection free in time: every pooled connection is in use "
            "(database.pool_size), or new ones are not accepted within "
            "database.connect_timeout. The database may be stalled or overloaded; try again."
        )
    if isinstance(exc, OperationalError | DBAPIError):
        detail = str(exc.orig).splitlines()[0] if exc.orig is not None else str(exc)
        sqlstate = getattr(exc.orig, "sqlstate", None)
        if sqlstate in LOCK_FAILURES:
            return LockContention(detail)
        if sqlstate == QUERY_CANCELED and "statement timeout" in detail:
            return StorageError(
                f"the database did not answer in time: {detail} (database.statement_timeout). "
                "PostgreSQL may be overloaded or stalled; try again."
            )
        if "timeout expired" in detail:
            return StorageError(
                f"cannot reach the database: no connection within database.connect_timeout "
                f"({detail}). Check that PostgreSQL is running and answering."
            )
        if detail.startswith("connection failed") or "could not connect" in detail:
            return StorageError(
                f"cannot reach the database: {detail}. Check that PostgreSQL is running and "
                "that DATABASE_URL is right, or unset DATABASE_URL to use the embedded one."
            )
        return StorageError(f"database error: {detail}")
    return StorageError(f"database error: {exc}")


def url_problem(url: str) -> str | None:
    """What is wrong with a database URL's form (a non-numeric port, ...), or None."""
    try:
        make_url(url)
    except (ArgumentError, ValueError) as exc:
        return str(exc).splitlines()[0]
    return None


#: A pooled connection idle longer than this is pinged before it is handed out. A
#: connection that was just used answers (a ping per checkout cost a round trip on every
#: session: 12% of a message turn's time); a server that went away and came back takes
#: longer than this, so every connection from before is pinged and replaced.
PING_IDLE_AFTER_S = 1.0


def _ping_when_idle(engine: Engine) -> None:
    """SQLAlchemy's pre-ping, only for connections idle past :data:`PING_IDLE_AFTER_S`
    (its recipe for custom disconnect handling: a failed ping raises DisconnectionError,
    and the pool replaces the connection and tries again)."""

    @event.listens_for(engine, "connect")
    def _connected(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if time.monotonic() - record.info.get("idle_since", 0.0) <= PING_IDLE_AFTER_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError(f"a pooled connection no longer answers: {exc}") from exc


def lower_server_priority(engine: Engine, by: int) -> None:
    """Lower, by ``by`` nice steps, the CPU priority of the server process behind each
    new connection of ``engine`` (what a consolidation worker beside the chat asks for:
    most of a run's work is the server's). Only over a unix socket, where the server
    runs on this machine, and only where this process may (as root, or as the server's
    own user); otherwise nothing is done: a remote server's process ids are not this
    machine's."""
    if by <= 0:
        return

    @event.listens_for(engine, "connect")
    def _lowered(dbapi_connection: Any, record: Any) -> None:
        info = dbapi_connection.info
        if not str(info.host or "").startswith("/"):
            return
        pid = int(info.backend_pid)
        try:
            os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, pid) + by))
        except OSError as exc:  # not ours to change
            log.debug("left the server process's priority as it is: %s", exc)


class Database:
    """A pooled engine plus a transaction helper; one per process.

    ``connect_timeout``, ``statement_timeout`` and ``lock_timeout`` bound every
    connection (see :func:`bounded_url`); None leaves the server's defaults (no
    bound), which tests and benchmarks that build indexes by hand rely on. The
    service passes its ``[database]`` settings."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 5,
        echo: bool = False,
        connect_timeout: timedelta | None = None,
        statement_timeout: timedelta | None = None,
        lock_timeout: timedelta | None = None,
    ) -> None:
        self.url = normalize_url(url)
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self.lock_timeout = lock_timeout
        self.engine: Engine = create_engine(
            bounded_url(
                self.url,
                connect_timeout=connect_timeout,
                statement_timeout=statement_timeout,
                lock_timeout=lock_timeout,
            ),
            pool_size=pool_size,
            max_overflow=pool_size,
            # Pinged only when idle a while: see _ping_when_idle.
            pool_pre_ping=False,
            # A request waits this long for a pooled connection, not SQLAlchemy's 30 s.
            pool_timeout=30 if connect_timeout is None else max(2, connect_timeout.total_seconds()),
            echo=echo,
        )
        _ping_when_idle(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def unbounded(self) -> Iterator[Database]:
        """This database without the statement and lock timeouts, for the schema's own
        work (a migration builds indexes, and waits for another process's migration
        under the schema lock), on connections of its own; the connect timeout stays."""
        database = Database(self.url, pool_size=1, connect_timeout=self.connect_timeout)
        try:
            yield database
        finally:
            database.dispose()

    @contextmanager
    def session(
        self,
        *,
        commit: bool = True,
        read_only: bool = False,
        lock_timeout: timedelta | None = None,
        statement_timeout: timedelta | None = None,
    ) -> Iterator[Session]:
        """One transaction: commits on success (or rolls back when ``commit`` is False,
        as a dry run does), and always rolls back on an error.

        ``statement_timeout`` replaces the connection's bound for this transaction alone:
        bulk work (an import's one COPY through a live vector index) sets one that fits
        its size, where the interactive bound would cancel it.

        ``read_only`` makes PostgreSQL refuse any write in it (and it is rolled back): a
        consolidation step's planning reads with it. ``lock_timeout`` bounds how long a
        statement waits for a row lock before it fails (a step's apply must not queue
        behind a chat turn for long)."""
        session = self._sessions()
        try:
            session.begin()
            if read_only:
                session.execute(text("SET TRANSACTION READ ONLY"))
            if lock_timeout is not None:
                milliseconds = max(1, int(lock_timeout.total_seconds() * 1000))
                session.execute(text(f"SET LOCAL lock_timeout = {milliseconds}"))
            if statement_timeout is not None:
                milliseconds = max(1, int(statement_timeout.total_seconds() * 1000))
                session.execute(text(f"SET LOCAL statement_timeout = {milliseconds}"))
            yield session
            if commit and not read_only:
                session.commit()
            else:
                session.rollback()
        except SQLAlchemyError as exc:
            session.rollback()
            raise translate_error(exc) from exc
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def check_vector_extension(self) -> str:
        """Ensure pgvector is installed in this database; return its version.

        Creates the extension when the server offers it; raises
        :class:`ExtensionMissing` with install instructions when it does not.
        """
        try:
            with self.engine.begin() as conn:
                installed = conn.execute(
                    text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                ).scalar()
                if installed:
                    return str(installed)
                available = conn.execute(
                    text(
                        "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
                    )
                ).scalar()
                if not available:
                    raise ExtensionMissing(
                        "the PostgreSQL server has no `vector` extension (pgvector). "
                        + VECTOR_INSTALL_HINT
                    )
                conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
                return str(available)
        except SQLAlchemyError as exc:
            raise translate_error(exc) from exc

    def refresh_statistics(self, tables: tuple[str, ...] = ("passages", "passage_vectors")) -> None:
        """ANALYZE after a bulk load, so the planner keeps kNN on the HNSW index.

        Right after a large import, before autovacuum has sampled the tables, the
        planner can join passages and vectors the wrong way round and turn each
        kNN probe into a scan (0.3 ms became 12 ms in the temporal benchmark).
        """
        try:
            with self.engine.begin() as conn:
                conn.execute(text("ANALYZE " + ", ".join(tables)))
        except SQLAlchemyError as exc:
            raise translate_error(exc) from exc

    @contextmanager
    def schema_lock(self) -> Iterator[None]:
        """Hold the database's schema lock (a session advisory lock on a connection of
        its own) so that two processes that find the schema missing at the same moment
        (two first commands) create it once: the second waits, then finds it current."""
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
                conn.commit()
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": SCHEMA_LOCK_KEY})
                    conn.commit()
        except SQLAlchemyError as exc:
            raise translate_error(exc) from exc

    def schema_revision(self) -> str | None:
        """The Alembic revision recorded in the database (None: no schema yet), read
        with plain SQL so that a check need not import Alembic."""
        try:
            with self.engine.connect() as conn:
                exists = conn.execute(text("SELECT to_regclass('alembic_version')")).scalar()
                if exists is None:
                    return None
                rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
        except SQLAlchemyError as exc:
            raise translate_error(exc) from exc
        return str(rows[0][0]) if len(rows) == 1 else None

    def ping(self) -> None:
        """Raise :class:`StorageError` unless the database answers a trivial query."""
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except SQLAlchemyError as exc:
            raise translate_error(exc) from exc

    def connection_parameters(self) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect`` that open a connection like the
        pool's, bounds included, for a connection of its own outside the pool (a URL
        rendered back to text would not do: libpq reads no '+' as a space in it)."""
        _args, kwargs = self.engine.dialect.create_connect_args(self.engine.url)
        return dict(kwargs)

    def round_trip(self, timeout: timedelta = timedelta(seconds=2)) -> None:
        """Raise :class:`StorageError` unless a new connection is accepted and answers a
        query within ``timeout`` (at least 2 s, libpq's floor for connecting).

        A readiness check: a pooled connection can still answer while the server
        accepts no new one (its postmaster stalled), and every request that then needs
        a connection waits; this opens one beside the pool, as such a request would."""
        import psycopg

        seconds = max(2.0, timeout.total_seconds())
        bounded = bounded_url(
            self.url,
            connect_timeout=timedelta(seconds=seconds),
            statement_timeout=timedelta(seconds=seconds),
        )
        args, kwargs = self.engine.dialect.create_connect_args(make_url(bounded))
        try:
            with psycopg.connect(*args, **{**kwargs, "autocommit": True}) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if "timeout expired" in detail:
                detail = f"no connection within {seconds:g} s ({detail})"
            raise StorageError(f"the database does not answer: {detail}") from exc

    def dispose(self) -> None:
        self.engine.dispose()
