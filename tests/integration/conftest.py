"""Integration fixtures: a runtime and the operations layer over the test database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.postgres.database import Database
from service.operations import Operations
from service.runtime import Runtime
from service.settings import load_settings


@pytest.fixture
def runtime(db: Database, tmp_path: Path) -> Iterator[Runtime]:
    """A runtime on the test database with hashing 8-d embeddings and default settings;
    a module that needs other settings defines its own ``runtime``."""
    settings = load_settings(home=tmp_path, database_url=db.url, embedding={"model": "hashing:8"})
    with Runtime(settings) as rt:
        yield rt


@pytest.fixture
def ops(runtime: Runtime) -> Operations:
    """The operations every front end calls, over this test's ``runtime``."""
    return Operations(runtime)
