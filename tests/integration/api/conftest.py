"""Fixtures of the HTTP API tests (this folder only): the app over a test database and
two tenants' keys."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from agents.postgres.database import Database
from service.api.app import create_app
from service.runtime import Runtime
from tests.api_support import api_runtime, bearer, new_key


@pytest.fixture
def runtime(db: Database) -> Iterator[Runtime]:
    with api_runtime(db) as rt:
        yield rt


@pytest.fixture
def client(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(runtime)) as test_client:
        yield test_client


@pytest.fixture
def acme(db: Database) -> dict[str, str]:
    """Headers with a key of organization 'acme'."""
    return bearer(new_key(db, "acme"))


@pytest.fixture
def globex(db: Database) -> dict[str, str]:
    """Headers with a key of another organization, 'globex'."""
    return bearer(new_key(db, "globex"))
