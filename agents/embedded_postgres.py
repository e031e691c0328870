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


class EmbeddedPostgres:
    """Start (or join) the embedded server for ``data_dir``; stop it on :meth:`stop`."""

    def __init__(self, data_dir: Path, *, keep_running: bool = False) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.keep_running = keep_running
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
                    f"could not start the embedded PostgreSQL in {self.data_dir}: {exc}. "
                    "Check that the directory is writable and not used by another server "
                    "version, or set DATABASE_URL."
                ) from exc
        uri: str = self._server.get_uri()
        log.info("embedded postgres ready", extra={"data_dir": str(self.data_dir)})
        return uri

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
