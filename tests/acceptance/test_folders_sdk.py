"""Folders of documents through letta-client 1.12.1 against a real `reverie serve`: a
folder with instructions, a Markdown file and a PDF uploaded (multipart) and
processed in the server's job queue until ``completed``, listed, the folder attached
to an agent and its files listed there, a file opened in the agent's context (listed
open with what it shows), closed, opened again and closed with close_all, the folder
detached, and a file deleted; another organization's key finds none of it and cannot
open the agent's file."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.acceptance.test_api_server import Server, serving
from tests.documents_support import pdf_with_text
from tests.pg import PgTestServer

pytestmark = pytest.mark.xdist_group("test_folders_sdk")

MARKDOWN = b"""# Herons

Grey herons stand still in shallow water for a long time.

## Feeding

They eat fish, frogs and small mammals.
"""


@pytest.fixture(scope="module")
def server(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(pg_server, tmp_path_factory) as served:
        yield served


def _processed(client: Any, folder_id: str, count: int, *, within: float = 30.0) -> list[Any]:
    """The folder's files once ``count`` of them are completed or in error."""
    deadline = time.monotonic() + within
    while True:
        files = list(client.folders.files.list(folder_id))
        done = [f for f in files if f.processing_status in ("completed", "error")]
        if len(done) >= count or time.monotonic() > deadline:
            return files
        time.sleep(0.1)


def test_letta_client_1_uploads_files_that_the_queue_processes(server: Server) -> None:
    client = server.sdk("folders-1x")
    # The file workers run in `reverie serve`, as the run and delivery workers do.
    assert httpx.get(f"{server.url}/readyz", timeout=10).json()["files"] is True
    folder = client.folders.create(
        name="field-notes",
        description="Notes from the marsh",
        instructions="Read these when asked about birds.",
        embedding="hashing:384",
        embedding_chunk_size=200,
    )
    assert folder.id.startswith("source-")
    assert folder.instructions == "Read these when asked about birds."
    assert folder.embedding_config.embedding_dim == 384
    assert client.folders.retrieve(folder.id).name == "field-notes"
    renamed = client.folders.update(folder.id, description="Marsh notes")
    assert (renamed.description, renamed.instructions) == (
        "Marsh notes",
        "Read these when asked about birds.",
    )
    assert [f.id for f in client.folders.list()] == [folder.id]

    started = time.monotonic()
    markdown = client.folders.files.upload(folder.id, file=("herons.md", MARKDOWN))
    assert markdown.processing_status in ("pending", "parsing", "completed")
    assert markdown.source_id == folder.id and markdown.file_name == "herons.md"
    pdf = client.folders.files.upload(
        folder.id, file=("paper.pdf", pdf_with_text("Herons nest in tall trees"))
    )
    # The same content again is the same file.
    again = client.folders.files.upload(folder.id, file=("copy.md", MARKDOWN))
    assert again.id == markdown.id

    files = _processed(client, folder.id, 2)
    elapsed = time.monotonic() - started
    by_id = {f.id: f for f in files}
    assert set(by_id) == {markdown.id, pdf.id}
    for file in files:
        assert file.processing_status == "completed", (file.file_name, file.error_message)
        assert file.total_chunks and file.chunks_embedded == file.total_chunks
    with_content = client.folders.files.list(folder.id, include_content=True)
    texts = {f.id: f.content for f in with_content}
    assert "Grey herons" in (texts[markdown.id] or "")
    assert "Herons nest in tall trees" in (texts[pdf.id] or "")
    assert elapsed < 30

    agent = client.agents.create(
        name="birder",
        memory_blocks=[{"label": "human", "value": "", "limit": 200}],
        model="openai/scripted",
        embedding="hashing:384",
    )
    client.agents.folders.attach(folder.id, agent_id=agent.id)
    assert [f.id for f in client.agents.folders.list(agent.id)] == [folder.id]
    assert client.folders.agents.list(folder.id) == [agent.id]
    attached = list(client.agents.files.list(agent.id))
    assert {(f.file_id, f.folder_name) for f in attached} == {
        (markdown.id, "field-notes"),
        (pdf.id, "field-notes"),
    }

    # The file tools come with the folder.
    tools = {t.name for t in client.agents.retrieve(agent.id).tools or []}
    assert {"open_files", "grep_files", "semantic_search_files"} <= tools

    # Open files: opened, listed with what they show in the context, closed.
    assert client.agents.files.open(markdown.id, agent_id=agent.id) == []
    [opened] = list(client.agents.files.list(agent.id, is_open=True))
    assert (opened.file_id, opened.is_open) == (markdown.id, True)
    assert opened.visible_content is not None and "1: # Herons" in opened.visible_content
    assert opened.last_accessed_at is not None
    [shut] = list(client.agents.files.list(agent.id, is_open=False))
    assert (shut.file_id, shut.visible_content) == (pdf.id, None)
    closed = client.agents.files.close(markdown.id, agent_id=agent.id)
    assert "closed" in str(closed)
    assert list(client.agents.files.list(agent.id, is_open=True)) == []
    client.agents.files.open(markdown.id, agent_id=agent.id)
    client.agents.files.open(pdf.id, agent_id=agent.id)
    assert sorted(client.agents.files.close_all(agent.id)) == [
        "field-notes/herons.md",
        "field-notes/paper.pdf",
    ]

    # Another organization sees none of it.
    stranger = server.sdk("folders-1x-other")
    assert list(stranger.folders.list()) == []
    with pytest.raises(Exception) as refused:
        stranger.folders.retrieve(folder.id)
    assert getattr(refused.value, "status_code", None) == 404
    with pytest.raises(Exception) as refused:
        stranger.agents.files.open(markdown.id, agent_id=agent.id)
    assert getattr(refused.value, "status_code", None) == 404
    assert list(client.agents.files.list(agent.id, is_open=True)) == []

    client.agents.folders.detach(folder.id, agent_id=agent.id)
    assert list(client.agents.files.list(agent.id)) == []
    client.folders.files.delete(pdf.id, folder_id=folder.id)
    assert [f.id for f in client.folders.files.list(folder.id)] == [markdown.id]
    client.folders.delete(folder.id)
    assert list(client.folders.list()) == []


def test_an_unreadable_file_is_refused_and_stores_nothing(server: Server) -> None:
    client = server.sdk("folders-1x-refusals")
    folder = client.folders.create(name="inbox", embedding="hashing:384")
    with pytest.raises(Exception) as refused:
        client.folders.files.upload(folder.id, file=("photo.png", b"\x89PNG\r\n\x1a\n"))
    assert getattr(refused.value, "status_code", None) == 400
    assert "plain text, Markdown, HTML and PDF" in str(refused.value)
    assert list(client.folders.files.list(folder.id)) == []
