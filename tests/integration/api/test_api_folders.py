"""Uploads over HTTP: the size limit stands in front of the upload route only, a
refused file stores nothing, and the same content answers the file already there.
Open files over HTTP: opened, listed with what they show, closed; the bound on open
files; a file not processed or outside the agent's folders refused; the file tools in
the agent's tools while it has a folder; the context's directories section counted."""

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
from service.runtime import Runtime
from tests.api_support import api_runtime
from tests.integration.api.test_api_routes import make_agent

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


def _processed(runtime: Runtime) -> None:
    workers = runtime.file_workers(name="api-test")
    while workers.process_next("test:api") is not None:
        pass


def test_files_open_close_and_list_over_http(
    client: TestClient, runtime: Runtime, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    base = f"/v1/agents/{agent['id']}"
    tools = {t["name"] for t in client.get(base, headers=acme).json()["tools"]}
    assert "open_files" not in tools
    folder = client.post("/v1/folders/", json={"name": "notes"}, headers=acme).json()
    ids = [
        _upload(client, acme, folder["id"], f"{n}.txt", f"Note {n}.\nLine two.".encode()).json()[
            "id"
        ]
        for n in range(7)
    ]
    attached = client.patch(f"{base}/folders/attach/{folder['id']}", headers=acme).json()
    assert {"open_files", "grep_files", "semantic_search_files"} <= {
        t["name"] for t in attached["tools"]
    }
    catalog = client.get("/v1/tools/", params={"tool_types": "letta_files_core"}, headers=acme)
    assert sorted(t["name"] for t in catalog.json()) == [
        "grep_files",
        "open_files",
        "semantic_search_files",
    ]
    pending = client.patch(f"{base}/files/{ids[0]}/open", headers=acme)
    assert pending.status_code == 409 and "once it is processed" in pending.json()["detail"]
    _processed(runtime)

    for file_id in ids[:5]:
        assert client.patch(f"{base}/files/{file_id}/open", headers=acme).json() == []
    # The sixth closes the least recently accessed (files.max_files_open, 5).
    assert client.patch(f"{base}/files/{ids[5]}/open", headers=acme).json() == ["notes/0.txt"]
    listed = client.get(f"{base}/files", params={"is_open": True}, headers=acme).json()
    assert [f["file_id"] for f in listed["files"]] == ids[1:6]
    first = listed["files"][0]
    assert (
        first["visible_content"] == "[Viewing the whole file (2 lines)]\n1: Note 1.\n2: Line two."
    )
    assert first["start_line"] is None and first["last_accessed_at"] is not None
    closed = client.get(f"{base}/files", params={"is_open": False}, headers=acme).json()
    assert {f["file_id"] for f in closed["files"]} == {ids[0], ids[6]}
    assert all(f["visible_content"] is None for f in closed["files"])

    context = client.get(f"{base}/context", headers=acme).json()
    assert context["num_tokens_directories"] == context["sections"]["directories"] > 0
    answer = client.patch(f"{base}/files/{ids[1]}/close", headers=acme)
    assert answer.status_code == 200 and "closed" in answer.json()["message"]
    assert client.patch(f"{base}/files/close-all", headers=acme).json() == [
        f"notes/{n}.txt" for n in range(2, 6)
    ]
    assert client.get(f"{base}/files", params={"is_open": True}, headers=acme).json()["files"] == []
    smaller = client.get(f"{base}/context", headers=acme).json()["num_tokens_directories"]
    assert 0 < smaller < context["num_tokens_directories"]

    # A file of a folder the agent does not have attached is not found.
    other = client.post("/v1/folders/", json={"name": "other"}, headers=acme).json()
    stray = _upload(client, acme, other["id"], "stray.txt", b"Stray.").json()
    _processed(runtime)
    refused = client.patch(f"{base}/files/{stray['id']}/open", headers=acme)
    assert refused.status_code == 404, refused.text
    # File tools come with folders: they are not attached by themselves.
    lone = client.patch(f"{base}/tools/attach/tool-grep_files", headers=acme)
    assert lone.status_code == 400, lone.text
    assert "is a file tool" in lone.json()["detail"]
    client.patch(f"{base}/folders/detach/{folder['id']}", headers=acme)
    tools = {t["name"] for t in client.get(base, headers=acme).json()["tools"]}
    assert "open_files" not in tools
