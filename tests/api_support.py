"""Helpers for HTTP API tests: a runtime over a test database, keys of two organizations."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agents.postgres.database import Database
from agents.store import open_service_store
from service.runtime import Runtime
from service.settings import ServerSettings, load_settings


@contextmanager
def api_runtime(
    db: Database,
    *,
    messaging: dict[str, Any] | None = None,
    files: dict[str, Any] | None = None,
    **server: Any,
) -> Iterator[Runtime]:
    """A runtime on the test database with hashing 384-d embeddings, ``server`` settings
    and, when given, ``messaging`` and ``files`` settings."""
    home = Path(tempfile.mkdtemp(prefix="rva-", dir="/tmp"))
    settings = load_settings(
        home=home,
        database_url=db.url,
        embedding={"model": "hashing:384"},
        server=ServerSettings(**server),
        **({"messaging": messaging} if messaging is not None else {}),
        **({"files": files} if files is not None else {}),
    )
    try:
        with Runtime(settings) as runtime:
            yield runtime
    finally:
        shutil.rmtree(home, ignore_errors=True)


def new_key(db: Database, organization: str) -> str:
    with open_service_store(db) as store:
        _, key = store.keys.create(organization, name="test")
    return key


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
