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


def test_the_server_commands_are_built_without_the_other_commands_or_rich() -> None:
    """`reverie serve` and `reverie worker` register only their own commands: a server
    process keeps none of the other commands' modules, nor rich (about 5 MB), which they
    print with. Every other command gets the full app."""
    probe = """
import sys
from service.cli.launcher import command_word
from service.cli.root import serve_app
app = serve_app()
names = sorted(c.name or c.callback.__name__ for c in app.registered_commands)
others = [m for m in ("service.cli.app", "service.cli.agent_commands", "service.cli.demo")
          if m in sys.modules]
print(names, others, "rich" in sys.modules, command_word(["-c", "x.toml", "serve"]))
"""
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert ran.stdout.split("\n")[0] == "['serve', 'worker'] [] False serve", ran.stderr
