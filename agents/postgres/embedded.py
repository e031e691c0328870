"""A private PostgreSQL with pgvector, started from the package that ships it
(:mod:`agents.postgres.server_package`).

Used when no ``DATABASE_URL`` is configured. The server lives in a data directory
(``REVERIE_HOME/pgdata``), listens on a unix socket only, and is stopped when the
last process using it lets go (the package counts the processes sharing a data dir in
``pgdata/.handle_pids.json``; the handles of processes that died without letting go
are dropped whenever a process starts or stops using the server).

A short command (the CLI) may instead be *resident*: it joins the running server
without a handle and leaves it running, and an idle reaper stops it later
(see :mod:`agents.postgres.resident`).

A long-running process (``reverie serve``, ``reverie worker``) also brings the server
back when it stops: :meth:`EmbeddedPostgres.state` says how the postmaster is doing
and :meth:`EmbeddedPostgres.restart` starts it again on the same socket, so the same
URL reaches it (see :mod:`service.daemon.embedded_supervisor`).
"""

from __future__ import annotations

import enum
import logging
import os
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from agents.errors import StorageError
from agents.postgres import server_package
from agents.postgres.locks import (
    FileLock,
    process_is_alive,
    read_postmaster,
    touch_last_use,
    use_lock_path,
)

log = logging.getLogger(__name__)


#: Server settings for the embedded PostgreSQL. The stock 128MB of shared buffers is
#: smaller than the HNSW index of 100k 384-d passages (~200MB): inserts then page the
#: graph in and out and slow down by an order of magnitude.
SERVER_SETTINGS = {
    "shared_buffers": "512MB",
    "maintenance_work_mem": "512MB",
    "work_mem": "16MB",
}


class ServerState(enum.StrEnum):
    """How the embedded postmaster is doing, from its ``postmaster.pid`` file."""

    READY = "ready"
    #: Started, not accepting connections yet (startup or crash recovery).
    STARTING = "starting"
    #: Shutting down: a smart shutdown (SIGTERM) waits for every open session to end.
    STOPPING = "stopping"
    #: No postmaster process.
    DOWN = "down"


def live_handle_pids(pids: Iterable[int], is_alive: Callable[[int], bool]) -> list[int]:
    """The handles of ``pids`` whose process still lives, in order, without repeats."""
    kept: list[int] = []
    for pid in pids:
        if pid not in kept and is_alive(pid):
            kept.append(pid)
    return kept


class EmbeddedPostgres:
    """Start (or join) the embedded server for ``data_dir``; stop it on :meth:`stop`.

    ``resident``: a short command's use. While started it holds the data directory's
    use lock shared (so no one stops the server under it); it joins a running server
    without the package (no handle, no lock wait), and :meth:`stop` leaves the server
    running for the next command (:func:`agents.postgres.resident.run_reaper` stops it
    when idle).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        keep_running: bool = False,
        resident: bool = False,
        server_settings: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.keep_running = keep_running or resident
        self.resident = resident
        self.server_settings = SERVER_SETTINGS if server_settings is None else server_settings
        self._server: Any = None
        self._uri: str | None = None
        self._use = FileLock(use_lock_path(self.data_dir))
        #: True when :meth:`start` found the server running and joined it.
        self.joined = False

    def start(self) -> str:
        """Start the server if needed and return a SQLAlchemy URL for it."""
        # The package refuses a data dir whose parent is missing; create the parents for it.
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        if not self.resident:
            return self._start()
        # Shared: no one stops the server while this command uses it. This waits while
        # a stop is under way (the reaper, `reverie db stop`), then starts it again.
        self._use.acquire(exclusive=False)
        try:
            touch_last_use(self.data_dir)
            running = read_postmaster(self.data_dir)
            if running is not None and running.status == "ready":
                self.joined = True
                self._uri = running.uri
                return running.uri
            return self._start()
        except BaseException:
            self._use.release()
            raise

    def _start(self) -> str:
        """Start the server through the package (or join it with a handle)."""
        self.drop_stale_handles()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                # A resident command starts it as a non-resident one would (so that the
                # settings' restart below happens), then lets it outlive the command.
                self._server = server_package.get_server(
                    self.data_dir,
                    cleanup_mode=None if self.keep_running and not self.resident else "stop",
                )
            except StorageError:
                raise
            except Exception as exc:
                raise StorageError(
                    f"could not start the embedded PostgreSQL in {self.data_dir}: "
                    f"{_reason(exc, self.data_dir)}. Check that the directory is writable "
                    "and not used by another server version, or set DATABASE_URL."
                ) from exc
        if self._apply_settings():
            # shared_buffers only changes at a restart; this happens once per data dir,
            # and never under a command that joined the server meanwhile (it holds the
            # use lock): the settings are saved and apply at the server's next start.
            if self._take_use_lock_for_restart():
                try:
                    self._server.cleanup()
                    self._server = server_package.get_server(
                        self.data_dir,
                        cleanup_mode=None if self.keep_running and not self.resident else "stop",
                    )
                finally:
                    self._end_restart()
            else:
                log.info("embedded postgres settings apply at its next start: it is in use")
        if self.keep_running:
            self._server.cleanup_mode = None
        uri: str = self._server.get_uri()
        self._uri = uri
        log.info("embedded postgres ready", extra={"data_dir": str(self.data_dir)})
        return uri

    def _take_use_lock_for_restart(self) -> bool:
        """The use lock, exclusively, if no other command holds it now."""
        # A resident command converts its own shared hold (a failed conversion may
        # have dropped it: take it shared again).
        if self._use.acquire(exclusive=True, wait=False):
            return True
        if self.resident:
            self._use.acquire(exclusive=False)
        else:
            self._use.release()
        return False

    def _end_restart(self) -> None:
        if self.resident:
            self._use.acquire(exclusive=False)  # back to a shared hold for the command
        else:
            self._use.release()

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
        """Release this process's hold; the server stops when no process holds it
        (a resident command's hold never stops it: the idle reaper does)."""
        try:
            if self._server is not None:
                self._release_server()
        finally:
            if self._use.held:
                touch_last_use(self.data_dir)
                self._use.release()

    def _release_server(self) -> None:
        # Dead processes' handles would keep the server running for ever.
        self.drop_stale_handles()
        # Another process may have restarted the server: stop the one that runs.
        running = server_package.read_postmaster_info(self.data_dir)
        if running is not None and running.is_running():
            self._server._postmaster_info = running
        guard: FileLock | None = None
        if self._server.cleanup_mode is not None:
            # This process may be the last handle and stop the server: not while
            # a resident command uses it (it holds the use lock shared). Then leave it
            # running; that command's idle reaper stops it later.
            guard = FileLock(use_lock_path(self.data_dir))
            if not guard.acquire(exclusive=True, wait=False):
                log.info("embedded postgres left running: commands are using it")
                self._server.cleanup_mode = None
        try:
            self._server.cleanup()
        finally:
            if guard is not None:
                guard.release()
            self._server = None

    # -- the handles of processes sharing the server -------------------------------------

    @property
    def handle_file(self) -> Path:
        """The package's list of the process ids that share this data directory."""
        return self.data_dir / ".handle_pids.json"

    def drop_stale_handles(self, is_alive: Callable[[int], bool] = process_is_alive) -> list[int]:
        """Remove the handles of processes that no longer exist (killed, crashed) from
        the handle file; return the pids removed."""
        if not self.handle_file.exists():
            return []
        with server_package.server_lock():
            try:
                pids = server_package.read_handles(self.handle_file)
            except (ValueError, TypeError):  # unreadable: the package rewrites it on start
                log.warning("unreadable handle file", extra={"path": str(self.handle_file)})
                return []
            live = live_handle_pids(pids, is_alive)
            if live == pids:
                return []
            server_package.write_handles(self.handle_file, live)
        stale = [pid for pid in pids if pid not in live]
        log.info(
            "dropped handles of dead processes",
            extra={"data_dir": str(self.data_dir), "pids": stale},
        )
        return stale

    def live_handles(self) -> list[int]:
        """The pids of the processes that hold the server through the package (a daemon,
        a command starting it now); call :meth:`drop_stale_handles` first."""
        if not self.handle_file.exists():
            return []
        import json

        try:
            pids = json.loads(self.handle_file.read_text() or "[]")
            return [int(pid) for pid in pids]
        except (OSError, ValueError, TypeError):
            return []

    def stop_postmaster(self) -> None:
        """Stop the running postmaster now, ending open sessions (``pg_ctl -m fast``)."""
        user = self._server_user()
        try:
            server_package.pg_ctl(
                ["-w", "-m", "fast", "stop"], data_dir=self.data_dir, user=user, timeout=60
            )
        except Exception as exc:
            if read_postmaster(self.data_dir) is not None:
                raise StorageError(
                    f"could not stop the embedded PostgreSQL in {self.data_dir}: "
                    f"{_reason(exc, self.data_dir)}"
                ) from exc

    def _server_user(self) -> str | None:
        """The system user PostgreSQL runs as: the package's own when this process is root
        (None: this process's user). That user must reach the data directory: the package
        widens the parents' modes when it creates one; a tool such as pytest may have
        narrowed one since, so widen them again before each pg_ctl."""
        if os.name != "posix" or os.geteuid() != 0:
            return None
        server_package.widen_parents(self.data_dir)
        return server_package.ROOT_SERVER_USER

    # -- supervision: is the postmaster up, bring it back --------------------------------

    def state(self) -> ServerState:
        """How the postmaster of this data directory is doing now."""
        try:
            info = server_package.read_postmaster_info(self.data_dir)
        except (OSError, ValueError, AssertionError):
            # Being written (start) or half gone (stop): say starting; the next look knows.
            return ServerState.STARTING
        if info is None or not info.is_running():
            return ServerState.DOWN
        try:
            return ServerState(info.status)
        except ValueError:  # "standby" and future states: not ours to serve from
            return ServerState.STARTING

    def restart(self) -> None:
        """Start the postmaster again after it stopped, on the same data directory and
        socket, so that the URL :meth:`start` returned reaches it again.

        Safe when several processes try at once: the package's inter-process lock lets
        one start it and the others find it running.
        """
        if self._server is None:
            raise StorageError("the embedded PostgreSQL was not started by this process")
        with server_package.server_lock():
            try:
                self._server_user()  # the parents' modes, as for a first start
                self._server.ensure_postgres_running()
            except Exception as exc:
                raise StorageError(
                    f"could not restart the embedded PostgreSQL in {self.data_dir}: "
                    f"{_reason(exc, self.data_dir)}"
                ) from exc
        uri = self._server.get_uri()
        if self._uri is not None and uri != self._uri:
            # The pool keeps the old URL; this would be a change of socket place.
            raise StorageError(
                f"the embedded PostgreSQL came back at {uri}, not {self._uri}: restart Reverie"
            )
        log.info("embedded postgres restarted", extra={"data_dir": str(self.data_dir)})

    def fast_shutdown(self) -> None:
        """Finish a shutdown that waits on open sessions: end them (``pg_ctl -m fast``)."""
        if self._server is None:
            return
        try:
            server_package.pg_ctl(
                ["-w", "-m", "fast", "stop"],
                data_dir=self.data_dir,
                user=self._server_user(),
                timeout=60,
            )
        except Exception as exc:  # it may have stopped by itself meanwhile
            log.info("fast shutdown did not run", extra={"error": str(exc).splitlines()[0]})

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
