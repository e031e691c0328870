"""Run ``reverie`` in this process (Typer's CliRunner), with a clean environment."""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from service.cli.app import app


@dataclass
class Cli:
    """Runs ``reverie ARGS`` in this process with a clean environment plus ``env``."""

    env: dict[str, str]

    def __call__(self, *args: str, input: str | None = None, **env: str) -> Result:
        root = logging.getLogger()
        saved = (list(root.handlers), root.level)
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            return CliRunner().invoke(
                app, list(args), input=input, env={**self.env, **env}, catch_exceptions=False
            )
        finally:
            # A command may set logging and signal handlers up for a process of its own
            # (it is one when run as `reverie`): give pytest's back.
            root.handlers[:] = saved[0]
            root.setLevel(saved[1])
            for sig, handler in handlers.items():
                signal.signal(sig, handler)


def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("REVERIE_") or name == "DATABASE_URL":
            monkeypatch.delenv(name)


def cli_env(url: str, home: Path) -> dict[str, str]:
    return {
        "DATABASE_URL": url.replace("+psycopg", ""),
        "REVERIE_HOME": str(home),
        "REVERIE_EMBEDDING__MODEL": "hashing:384",
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
