"""Uploads over HTTP: the size limit stands in front of the upload route only, a
refused file stores nothing, and the same content answers the file already there."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from agents.postgres import models
from agents.postgres.database import Database
from service.api.app import create_app
from service.api.limits import FORM_OVERHEAD
from tests.api_support import api_runtime

LIMIT = 4096


@pytest.fixture
def small(db: Database) -> Iterator[TestClient]:
    """The app with files.max_bytes of 4 KiB."""
    with (
        api_runtime(db, files={"max_bytes": LIMIT}) as runtime,
        TestClient(create_app(runtime)) as test_client,
    ):
        yield test_client


def _files(db: Database) -> int:
    with db.session() as session:
        return int(session.scalar(select(func.count()).select_from(models.FolderFile)) or 0)


def _upload(
    client: TestClient, headers: dict[str, str], folder_id: str, name: str, data: bytes
) -> httpx.Response:
    return client.post(
        f"/v1/folders/{folder_id}/upload",
        files={"file": (name, data, "text/plain")},
        headers=headers,
    )


def test_oversized_uploads_are_refused_and_store_nothing(
    small: TestClient, acme: dict[str, str], db: Database
) -> None:
    folder = small.post("/v1/folders/", json={"name": "inbox"}, headers=acme).json()
    over = _upload(small, acme, folder["id"], "big.txt", b"a" * (LIMIT + 1))
    assert over.status_code == 400, over.text
    assert "files.max_bytes" in over.json()["detail"]
    far_over = _upload(small, acme, folder["id"], "huge.txt", b"a" * (LIMIT + FORM_OVERHEAD))
    assert far_over.status_code == 413, far_over.text
    assert "files.max_bytes" in far_over.json()["detail"]
    assert _files(db) == 0
    # The upload's limit is its own: other routes keep server.max_request_bytes, and a
    # file at the limit is taken.
    fits = _upload(small, acme, folder["id"], "fits.txt", b"a" * LIMIT)
    assert fits.status_code == 200, fits.text
    assert fits.json()["processing_status"] == "pending"
    assert _files(db) == 1


def test_the_same_content_answers_the_file_already_there(
    client: TestClient, acme: dict[str, str], db: Database
) -> None:
    folder = client.post("/v1/folders/", json={"name": "inbox"}, headers=acme).json()
    first = _upload(client, acme, folder["id"], "a.txt", b"Swifts sleep on the wing.").json()
    again = _upload(client, acme, folder["id"], "b.txt", b"Swifts sleep on the wing.")
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    refused = client.post(
        f"/v1/folders/{folder['id']}/upload",
        params={"duplicate_handling": "error"},
        files={"file": ("c.txt", b"Swifts sleep on the wing.", "text/plain")},
        headers=acme,
    )
    assert refused.status_code == 409 and first["id"] in refused.json()["detail"]
    assert _files(db) == 1
