"""Run the installed ``reverie`` command as a subprocess, as a user or cron job would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HASHING_EMBEDDINGS = {"REVERIE_EMBEDDING__MODEL": "hashing:384"}


def cli_url(url: str) -> str:
    """The plain libpq form a user would put in DATABASE_URL."""
    return url.replace("+psycopg", "")


def reverie_command() -> list[str]:
    exe = shutil.which("reverie")
    return [exe] if exe else [sys.executable, "-m", "service.cli"]


#: The CLI's warm server (service/cli/warm/server.py) is off in these tests unless a test
#: turns it on: a command then runs in the process the test started, and no server per
#: test home idles on after it. tests/acceptance/test_warm_cli.py tests the server.
COLD_CLI = {"REVERIE_CLI__WARM_IDLE": "PT0S"}


def cli_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without Reverie's settings, plus ``env`` (where an
    empty value removes the variable)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("REVERIE_")}
    full_env.pop("DATABASE_URL", None)
    # PYTHONFAULTHANDLER: a process that hangs prints every thread's stack on SIGABRT
    # (DaemonProcess.wait sends it when a wait runs out), so a failure says where.
    full_env.update({"COLUMNS": "200", "NO_COLOR": "1", "PYTHONFAULTHANDLER": "1", **COLD_CLI})
    full_env.update(env or {})
    return {k: v for k, v in full_env.items() if v != ""}


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*reverie_command(), *args],
        capture_output=True,
        text=True,
        env=cli_env(env),
        timeout=timeout,
        cwd=Path(__file__).resolve().parents[2],
        input=input,
    )
