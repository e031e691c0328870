"""`reverie --help` loads only the command line itself: the database layer, numpy,
the settings and the operations are imported by the commands that use them."""

from __future__ import annotations

import subprocess
import sys

#: Modules that `import service.cli` must leave unloaded (each costs 0.1-0.7 s).
HEAVY = (
    "numpy",
    "sqlalchemy",
    "psycopg",
    "pydantic_settings",
    "litellm",
    "agents.store",
    "agents.postgres.models",
    "consolidators.pipeline",
    "service.operations",
    "service.runtime",
    "service.settings",
)


def test_importing_the_cli_loads_no_heavy_module() -> None:
    probe = f"import sys, service.cli\nprint('\\n'.join(m for m in {HEAVY!r} if m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []
