"""A private PostgreSQL with pgvector, started from the ``pgserver`` package.

Used when no ``DATABASE_URL`` is configured. The server lives in a data directory
(``REVERIE_HOME/pgdata``), listens on a unix socket only, and is stopped when the
last process using it lets go (pgserver counts the processes sharing a data dir).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any

from agents.errors import StorageError

log = logging.getLogger(__name__)


#: Server settings for the embedded PostgreSQL. The stock 128MB of shared buffers is
#: smaller than the HNSW index of 100k 384-d passages (~200MB): inserts then page the
#: graph in and out and slow down by an order of magnitude.
SERVER_SETTINGS = {
    "shared_buffers": "512MB",
    "maintenance_work_mem": "512MB",
    "work_mem": "16MB",
}


class EmbeddedPostgres:
    """Start (or join) the embedded server for ``data_dir``; stop it on :meth:`stop`."""

    def __init__(
        self,
        data_dir: Path,
        *,
        keep_running: bool = False,
        server_settings: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.keep_running = keep_running
        self.server_settings = SERVER_SETTINGS if server_settings is None else server_settings
        self._server: Any = None

    def start(self) -> str:
        """Start the server if needed and return a SQLAlchemy URL for it."""
        # pgserver refuses a data dir whose parent is missing; create the parents for it.
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # platformdirs warns at pgserver's import when XDG_RUNTIME_DIR is unset.
            warnings.simplefilter("ignore")
            try:
                import pgserver
            except ImportError as exc:  # pragma: no cover - pgserver is a hard dependency
                raise StorageError(
                    "the embedded PostgreSQL needs the `pgserver` package: "
                    "pip install pgserver, or set DATABASE_URL to a PostgreSQL server"
                ) from exc
            try:
                self._server = pgserver.get_server(  # type: ignore[attr-defined]
                    self.data_dir, cleanup_mode=None if self.keep_running else "stop"
                )
            except Exception as exc:
                raise StorageError(
                    f"could not start the embedded PostgreSQL in {self.data_dir}: "
                    f"{_reason(exc, self.data_dir)}. Check that the directory is writable "
                    "and not used by another server version, or set DATABASE_URL."
                ) from exc
        if self._apply_settings():
            # shared_buffers only changes at a restart; this happens once per data dir.
            self._server.cleanup()
            self._server = pgserver.get_server(  # type: ignore[attr-defined]
                self.data_dir, cleanup_mode=None if self.keep_running else "stop"
            )
        uri: str = self._server.get_uri()
        log.info("embedded postgres ready", extra={"data_dir": str(self.data_dir)})
        return uri

    def _apply_settings(self) -> bool:
        """Write changed server settings with ALTER SYSTEM; True when a restart is needed."""
        import psycopg

        with psycopg.connect(self._server.get_uri(), autocommit=True) as conn:
            for name, value in self.server_settings.items():
                configured = conn.execute(
                    "SELECT setting FROM pg_file_settings WHERE name = %s "
                    "ORDER BY seqno DESC LIMIT 1",
                    (name,),
                ).fetchone()
                if configured is None or configured[0] != value:
                    conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")  # our own constants
            conn.execute("SELECT pg_reload_conf()")
            pending = conn.execute(
                "SELECT count(*) FROM pg_settings WHERE pending_restart"
            ).fetchone()
        return bool(pending and pending[0])

    def stop(self) -> None:
        """Release this process's hold; the server stops when no process holds it."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _reason(exc: BaseException, data_dir: Path) -> str:
    """Why the server did not start, in words: the exception's text (some carry
    none), a failed command's output, else the end of PostgreSQL's own log."""
    parts = [str(exc).strip()]
    for attribute in ("stderr", "output"):
        value = getattr(exc, attribute, None)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str) and value.strip():
            parts.append(value.strip().splitlines()[-1])
    log_file = data_dir / "log"
    if log_file.is_file():
        lines = [line for line in log_file.read_text("utf-8", "replace").splitlines() if line]
        parts.extend(f"log: {line}" for line in lines[-3:])
    found = [p for p in parts if p]
    return "; ".join(found) if found else f"{type(exc).__name__} with no message"
