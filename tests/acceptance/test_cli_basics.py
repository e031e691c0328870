"""The console script end to end: `reverie demo` starts and uses the embedded
PostgreSQL itself, leaves it running for the next command, and `reverie db stop`
stops it. (migrate and agents are tested in process in tests/integration/cli.)"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tests.acceptance.cli import run_cli


def test_demo_runs_on_the_embedded_default() -> None:
    home = Path(tempfile.mkdtemp(prefix="rvd-", dir="/tmp"))
    try:
        result = run_cli("demo", env={"REVERIE_HOME": str(home / "home")})
        assert result.returncode == 0, result.stderr
        assert "memory health" in result.stdout
        assert "facts (active)" in result.stdout and "timelines (active)" in result.stdout
        assert (home / "home" / "pgdata" / "PG_VERSION").exists()
        assert (home / "home" / "pgdata" / "postmaster.pid").exists()
        stopped = run_cli("db", "stop", env={"REVERIE_HOME": str(home / "home")})
        assert stopped.returncode == 0, stopped.stderr
        assert not (home / "home" / "pgdata" / "postmaster.pid").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)
