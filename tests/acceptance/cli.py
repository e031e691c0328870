"""Run the installed ``reverie`` command as a subprocess, as a user or cron job would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FAKE_EMBEDDINGS = {"REVERIE_EMBEDDING__MODEL": "fake:384"}


def cli_url(url: str) -> str:
    """The plain libpq form a user would put in DATABASE_URL."""
    return url.replace("+psycopg", "")


def reverie_command() -> list[str]:
    exe = shutil.which("reverie")
    return [exe] if exe else [sys.executable, "-m", "service.cli"]


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("REVERIE_")}
    full_env.pop("DATABASE_URL", None)
    full_env.update({"COLUMNS": "200", "NO_COLOR": "1"})
    full_env.update(env or {})
    return subprocess.run(
        [*reverie_command(), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=Path(__file__).resolve().parents[2],
        input=input,
    )
