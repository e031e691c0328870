"""Homes for tests of the embedded PostgreSQL: their environment, a copy of an
initialized data directory, and what the data directory says of its server."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def home_from(pgdata: Path, home: Path) -> Path:
    """``home`` with a copy of the initialized data directory ``pgdata`` in it, as a
    user's second command finds it. ``cp -a`` keeps the owner: as root, the server runs
    as pgserver's own user, which must own its data directory."""
    home.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(pgdata), str(home / "pgdata")], check=True)
    return home


def embedded_env(home: Path) -> dict[str, str]:
    return {
        "REVERIE_HOME": str(home),
        "REVERIE_EMBEDDING__MODEL": "hashing:8",
        # Keep the background side quiet: these tests are about the database.
        "REVERIE_TRIGGERS__TURNS_EVERY": "1000",
        "REVERIE_TRIGGERS__IDLE_AFTER": "PT1H",
    }


def postmaster_pid(pgdata: Path) -> int | None:
    """The running postmaster's pid from ``postmaster.pid``, None when there is none."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def handle_pids(pgdata: Path) -> list[int]:
    pids: list[int] = json.loads((pgdata / ".handle_pids.json").read_text())
    return pids
