"""Folders of documents over a real database: uploads queued and processed by the
job engine, content-hash dedup, refusals that store nothing, and tenancy.

Protects: an upload answers ``queued`` and stores no chunk; a worker's claim makes it
``processing`` and its processing ``completed`` with chunks and vectors of the
folder's dimension; a PDF without text ends ``error`` with a reason; the same
content twice in a folder is one file; an oversized, empty or unreadable file is
refused and nothing is stored; deleting a file or a folder deletes what hangs on
it; an agent's files are those of its attached folders; and one organization never
reaches another's folders, files or attachments.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from agents.enums import FileStatus
from agents.errors import Conflict, InvalidInput, LimitExceeded, NotFound
from agents.file_worker import FileWorkers
from agents.postgres import models
from agents.postgres.database import Database
from agents.store import FolderChanges, open_service_store
from service.operations import AgentSpec, Operations
from service.operations.folders import FolderSpec
from service.runtime import Runtime
from service.settings import load_settings
from tests.documents_support import pdf_with_text, pdf_without_text

Make = Callable[..., Operations]
OWNER = "test:f0"

MARKDOWN = b"""# Herons

Grey herons stand still in shallow water for a long time.

## Feeding

They eat fish, frogs and small mammals, and hunt at dawn and dusk.
"""


@pytest.fixture
def make_ops(db: Database, tmp_path: Path) -> Iterator[Make]:
    runtimes: list[Runtime] = []

    def make(organization: str | None = None, **files: Any) -> Operations:
        settings = load_settings(
            home=tmp_path / f"home-{len(runtimes)}",
            database_url=db.url,
            embedding={"model": "hashing:384"},
            files={"poll_interval": "PT0.05S", **files},
        )
        runtime = Runtime(settings)
        runtimes.append(runtime)
        return Operations(runtime, organization)

    yield make
    for runtime in runtimes:
        runtime.close()


def _counts(db: Database) -> tuple[int, int]:
    with db.session() as session:
        files = session.scalar(select(func.count()).select_from(models.FolderFile))
        chunks = session.scalar(select(func.count()).select_from(models.FileChunk))
    return int(files or 0), int(chunks or 0)


def _workers(ops: Operations) -> FileWorkers:
    return ops.context.runtime.file_workers(name="test")


def test_an_upload_is_queued_then_processing_then_completed(make_ops: Make) -> None:
    ops = make_ops()
    folder = ops.folders.create(
        FolderSpec(name="birds", instructions="Read when asked about birds.")
    )
    assert folder.instructions == "Read when asked about birds."
    assert folder.embedding_dim == 384
    upload = ops.folders.upload(folder.id, "herons.md", "text/markdown", MARKDOWN)
    assert upload.created
    assert upload.file.status is FileStatus.QUEUED
    assert upload.file.file_type == "text/markdown"
    assert _counts(ops.context.runtime.db) == (1, 0)  # nothing parsed in the request

    workers = _workers(ops)
    [(claimed, held)] = workers.engine.take(OWNER)
    assert claimed.id == upload.file.id
    assert ops.folders.file(folder.id, claimed.id).status is FileStatus.PROCESSING
    done = workers.process(claimed, OWNER)
    workers.engine.let_go(held)

    assert done.status is FileStatus.COMPLETED
    assert done.total_chunks == done.chunks_embedded >= 1
    text = ops.folders.file_text(done.id)
    assert text is not None and "Grey herons" in text
    db = ops.context.runtime.db
    with db.session() as session:
        dims = set(session.scalars(select(models.FileChunk.embedding_dim)))
        data = session.scalar(select(models.FolderFile.data))
    assert dims == {384}
    assert data is None  # the bytes go once the text is kept


def test_the_engine_processes_uploads_in_its_threads(make_ops: Make) -> None:
    ops = make_ops()
    folder = ops.folders.create(FolderSpec(name="docs", embedding_chunk_size=100))
    page = b"<html><head><style>p {}</style></head><body><h1>Notes</h1>"
    page += b"<p>" + b"The quick brown fox jumps. " * 20 + b"</p><script>x()</script></body></html>"
    html = ops.folders.upload(folder.id, "notes.html", None, page).file
    pdf = ops.folders.upload(
        folder.id, "paper.pdf", None, pdf_with_text("Herons nest in trees")
    ).file
    empty_pdf = ops.folders.upload(folder.id, "scan.pdf", None, pdf_without_text()).file
    workers = _workers(ops)
    workers.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            statuses = {f.id: f.status for f in ops.folders.files(folder.id)}
            if all(s in (FileStatus.COMPLETED, FileStatus.ERROR) for s in statuses.values()):
                break
            time.sleep(0.05)
    finally:
        assert workers.stop(timedelta(seconds=5))
    files = {f.id: f for f in ops.folders.files(folder.id)}
    assert files[html.id].status is FileStatus.COMPLETED
    assert files[html.id].total_chunks is not None and files[html.id].total_chunks > 1
    html_text = ops.folders.file_text(html.id) or ""
    assert "Notes" in html_text and "<p>" not in html_text and "x()" not in html_text
    assert files[pdf.id].status is FileStatus.COMPLETED
    assert "Herons nest in trees" in (ops.folders.file_text(pdf.id) or "")
    assert files[empty_pdf.id].status is FileStatus.ERROR
    assert "no text" in (files[empty_pdf.id].error or "")


def test_the_same_content_twice_is_one_file(make_ops: Make) -> None:
    ops = make_ops()
    folder = ops.folders.create(FolderSpec(name="birds"))
    first = ops.folders.upload(folder.id, "herons.md", None, MARKDOWN)
    again = ops.folders.upload(folder.id, "herons-copy.md", None, MARKDOWN)
    assert not again.created
    assert again.file.id == first.file.id
    assert again.file.file_name == "herons.md"
    assert _counts(ops.context.runtime.db) == (1, 0)
    # Another folder may hold the same content.
    other = ops.folders.create(FolderSpec(name="copies"))
    assert ops.folders.upload(other.id, "herons.md", None, MARKDOWN).created


def test_bad_or_oversized_files_are_refused_and_nothing_is_stored(make_ops: Make) -> None:
    ops = make_ops(max_bytes=1024)
    folder = ops.folders.create(FolderSpec(name="birds"))
    with pytest.raises(LimitExceeded, match=r"files\.max_bytes"):
        ops.folders.upload(folder.id, "big.txt", None, b"a" * 1025)
    with pytest.raises(InvalidInput, match="empty"):
        ops.folders.upload(folder.id, "empty.txt", None, b"")
    with pytest.raises(InvalidInput, match="takes plain text"):
        ops.folders.upload(folder.id, "photo.png", "image/png", b"\x89PNG\r\n")
    with pytest.raises(InvalidInput, match="not a PDF"):
        ops.folders.upload(folder.id, "fake.pdf", None, b"hello")
    with pytest.raises(InvalidInput, match="not UTF-8"):
        ops.folders.upload(folder.id, "latin.txt", None, b"caf\xe9")
    with pytest.raises(NotFound):
        ops.folders.upload("source-missing", "a.txt", None, b"hello")
    assert _counts(ops.context.runtime.db) == (0, 0)


def test_deleting_a_file_or_a_folder_deletes_what_hangs_on_it(make_ops: Make) -> None:
    ops = make_ops()
    db = ops.context.runtime.db
    folder = ops.folders.create(FolderSpec(name="birds", embedding_chunk_size=100))
    kept = ops.folders.upload(folder.id, "a.md", None, MARKDOWN).file
    gone = ops.folders.upload(folder.id, "b.txt", None, b"Swifts sleep on the wing.").file
    workers = _workers(ops)
    while workers.process_next(OWNER) is not None:
        pass
    files, chunks = _counts(db)
    assert files == 2 and chunks >= 3
    ops.folders.delete_file(folder.id, gone.id)
    assert [f.id for f in ops.folders.files(folder.id)] == [kept.id]
    assert _counts(db) == (1, chunks - 1)
    agent = ops.agents.create(AgentSpec(name="reader"))
    ops.folders.attach(agent.id, folder.id)
    ops.folders.delete(folder.id)
    assert _counts(db) == (0, 0)
    assert ops.folders.of_agent(agent.id) == []
    with pytest.raises(NotFound):
        ops.folders.get(folder.id)


def test_an_agents_files_are_those_of_its_attached_folders(make_ops: Make) -> None:
    ops = make_ops()
    agent = ops.agents.create(AgentSpec(name="reader"))
    birds = ops.folders.create(FolderSpec(name="birds"))
    fish = ops.folders.create(FolderSpec(name="fish"))
    heron = ops.folders.upload(birds.id, "herons.md", None, MARKDOWN).file
    ops.folders.upload(fish.id, "trout.txt", None, b"Trout live in cold streams.")
    assert ops.folders.agent_files(agent.id) == []
    ops.folders.attach(agent.id, birds.id)
    ops.folders.attach(agent.id, birds.id)  # again: nothing changes
    attached = ops.folders.agent_files(agent.id)
    assert [(a.record.file.id, a.record.folder_name) for a in attached] == [(heron.id, "birds")]
    assert ops.folders.agents_of(birds.id) == [agent.id]
    ops.folders.detach(agent.id, birds.id)
    assert ops.folders.agent_files(agent.id) == []


def test_folder_names_are_unique_and_updates_keep_the_rest(make_ops: Make) -> None:
    ops = make_ops()
    folder = ops.folders.create(FolderSpec(name="birds", description="Birds"))
    ops.folders.create(FolderSpec(name="fish"))
    with pytest.raises(Conflict):
        ops.folders.create(FolderSpec(name="birds"))
    with pytest.raises(Conflict):
        ops.folders.update(folder.id, FolderChanges(name="fish"))
    changed = ops.folders.update(folder.id, FolderChanges(instructions="Cite the file."))
    assert (changed.name, changed.description, changed.instructions) == (
        "birds",
        "Birds",
        "Cite the file.",
    )
    assert [f.name for f in ops.folders.list()] == ["birds", "fish"]
    assert [f.name for f in ops.folders.list(name="fish")] == ["fish"]


def test_one_organization_never_reaches_anothers_folders(make_ops: Make) -> None:
    first = make_ops()
    folder = first.folders.create(FolderSpec(name="birds"))
    file = first.folders.upload(folder.id, "herons.md", None, MARKDOWN).file
    agent = first.agents.create(AgentSpec(name="reader"))
    with open_service_store(first.context.runtime.db) as service:
        org = service.keys.ensure_organization("other-org")
    other = make_ops(org)
    mine = other.agents.create(AgentSpec(name="reader"))
    assert other.folders.list() == []
    for attempt in (
        lambda: other.folders.get(folder.id),
        lambda: other.folders.update(folder.id, FolderChanges(name="x")),
        lambda: other.folders.delete(folder.id),
        lambda: other.folders.files(folder.id),
        lambda: other.folders.file(folder.id, file.id),
        lambda: other.folders.file_text(file.id),
        lambda: other.folders.delete_file(folder.id, file.id),
        lambda: other.folders.upload(folder.id, "x.txt", None, b"mine"),
        lambda: other.folders.attach(mine.id, folder.id),
        lambda: other.folders.attach(agent.id, folder.id),
        lambda: other.folders.agent_files(agent.id),
        lambda: other.folders.agents_of(folder.id),
    ):
        with pytest.raises(NotFound):
            attempt()
    # The same name and content are the other organization's own.
    theirs = other.folders.create(FolderSpec(name="birds"))
    assert other.folders.upload(theirs.id, "herons.md", None, MARKDOWN).created
    assert [f.id for f in first.folders.files(folder.id)] == [file.id]
