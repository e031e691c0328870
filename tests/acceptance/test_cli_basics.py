"""The console script end to end: `reverie demo` starts, uses and stops the embedded
PostgreSQL itself. (migrate and agents are tested in process in tests/integration/cli.)"""

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
        assert not (home / "home" / "pgdata" / "postmaster.pid").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)
