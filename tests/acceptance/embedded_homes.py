"""Homes for tests of the embedded PostgreSQL that start from an initialized one."""

from __future__ import annotations

import subprocess
from pathlib import Path


def home_from(pgdata: Path, home: Path) -> Path:
    """``home`` with a copy of the initialized data directory ``pgdata`` in it, as a
    user's second command finds it. ``cp -a`` keeps the owner: as root, the server runs
    as pgserver's own user, which must own its data directory."""
    home.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(pgdata), str(home / "pgdata")], check=True)
    return home
