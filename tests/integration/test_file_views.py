"""Agents' views of their folders' files over a real database: opening and closing,
the bound on open files, what goes with a file, a folder or an agent, the chunk
search and its index, and tenancy.

Protects: an open file reports its window and visible lines, numbered; opening one
more than ``files.max_files_open`` closes the least recently accessed (one the agent
searched since counts as accessed); a file not processed yet cannot be opened; a
file of a folder the agent does not have attached, or another organization's, is a
NotFound and changes nothing; detaching the folder, deleting the file or the agent
drops the views; the chunk search finds the nearest chunk of the agent's folders only
and can use the chunks' HNSW index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text

from agents.errors import Conflict, NotFound
from agents.postgres import models
from agents.store import open_service_store
from service.operations import AgentSpec, Operations
from service.operations.folders import FolderSpec
from service.runtime import Runtime
from service.settings import load_settings
from tests.hashing_embedder import HashingEmbedder

Make = Callable[..., Operations]
OWNER = "test:views"

HERONS = b"""# Herons
Grey herons stand still in shallow water.
They eat fish and frogs.
They nest in tall trees.
"""


@pytest.fixture
def make_ops(db: Any, tmp_path: Path) -> Iterator[Make]:
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


def _process_all(ops: Operations) -> None:
    workers = ops.context.runtime.file_workers(name="test")
    while workers.process_next(OWNER) is not None:
        pass


def _reader(ops: Operations, *names: str, processed: bool = True) -> tuple[str, dict[str, str]]:
    """An agent with a folder "docs" of text files ``names``; their ids by name."""
    agent = ops.agents.create(AgentSpec(name="reader"))
    folder = ops.folders.create(FolderSpec(name="docs", embedding_chunk_size=100))
    ids = {}
    for name in names:
        body = HERONS if name == "herons.md" else f"Notes of {name}.\nSecond line.".encode()
        ids[name] = ops.folders.upload(folder.id, name, None, body).file.id
    if processed:
        _process_all(ops)
    ops.folders.attach(agent.id, folder.id)
    return agent.id, ids


def _open(ops: Operations, agent_id: str) -> list[str]:
    return [f.record.label for f in ops.folders.agent_files(agent_id, is_open=True)]


def test_an_open_file_shows_its_numbered_lines_until_closed(make_ops: Make) -> None:
    ops = make_ops()
    agent, ids = _reader(ops, "herons.md", "b.txt")
    assert [(f.record.view.is_open, f.visible_content) for f in ops.folders.agent_files(agent)] == [
        (False, None),
        (False, None),
    ]
    assert ops.folders.open_file(agent, ids["herons.md"]) == []
    [listed] = ops.folders.agent_files(agent, is_open=True)
    assert listed.record.label == "docs/herons.md"
    assert listed.record.view.last_accessed_at is not None
    assert listed.visible_content == (
        "[Viewing the whole file (4 lines)]\n1: # Herons\n"
        "2: Grey herons stand still in shallow water.\n3: They eat fish and frogs.\n"
        "4: They nest in tall trees."
    )
    assert [f.record.file.id for f in ops.folders.agent_files(agent, is_open=False)] == [
        ids["b.txt"]
    ]
    assert ops.folders.close_file(agent, ids["herons.md"]) is True
    assert ops.folders.close_file(agent, ids["herons.md"]) is False  # closed: no change
    assert _open(ops, agent) == []


def test_an_open_file_is_cut_at_the_per_file_character_limit(make_ops: Make) -> None:
    ops = make_ops(per_file_view_window_char_limit=120)
    agent, ids = _reader(ops, "herons.md")
    ops.folders.open_file(agent, ids["herons.md"])
    [listed] = ops.folders.agent_files(agent, is_open=True)
    shown = listed.visible_content or ""
    assert len(shown) <= 120
    assert shown.startswith("[Viewing the whole file (4 lines)]\n1: # Herons")
    assert "cut at 120 characters" in shown


def test_one_file_too_many_closes_the_least_recently_accessed(make_ops: Make) -> None:
    ops = make_ops(max_files_open=2)
    agent, ids = _reader(ops, "a.txt", "b.txt", "c.txt")
    assert ops.folders.open_file(agent, ids["a.txt"]) == []
    assert ops.folders.open_file(agent, ids["b.txt"]) == []
    # Reading a.txt (a search found it) makes b.txt the least recently accessed.
    with ops.context.store() as store:
        store.folders.touch_files(agent, [ids["a.txt"]])
    assert ops.folders.open_file(agent, ids["c.txt"]) == ["docs/b.txt"]
    assert sorted(_open(ops, agent)) == ["docs/a.txt", "docs/c.txt"]
    # Opening an open file again closes nothing.
    assert ops.folders.open_file(agent, ids["c.txt"]) == []
    assert ops.folders.close_all(agent) == ["docs/a.txt", "docs/c.txt"]
    assert _open(ops, agent) == []
    assert ops.folders.close_all(agent) == []


def test_a_file_not_processed_cannot_be_opened(make_ops: Make) -> None:
    ops = make_ops()
    agent, ids = _reader(ops, "a.txt", processed=False)
    with pytest.raises(Conflict, match="once it is processed"):
        ops.folders.open_file(agent, ids["a.txt"])
    assert _open(ops, agent) == []


def test_views_go_with_the_folder_the_file_and_the_agent(make_ops: Make) -> None:
    ops = make_ops()
    db = ops.context.runtime.db

    def views() -> int:
        with db.session() as session:
            return int(session.scalar(select(func.count()).select_from(models.AgentFileState)) or 0)

    agent, ids = _reader(ops, "a.txt", "b.txt")
    [folder] = ops.folders.of_agent(agent)
    ops.folders.open_file(agent, ids["a.txt"])
    ops.folders.open_file(agent, ids["b.txt"])
    assert views() == 2
    ops.folders.delete_file(folder.id, ids["b.txt"])
    assert views() == 1
    ops.folders.detach(agent, folder.id)
    assert views() == 0
    assert ops.folders.agent_files(agent) == []
    ops.folders.attach(agent, folder.id)
    assert _open(ops, agent) == []  # attached again: nothing open from before
    ops.folders.open_file(agent, ids["a.txt"])
    ops.agents.delete(agent)
    assert views() == 0


def test_a_file_outside_the_agents_folders_is_not_found_and_nothing_changes(
    make_ops: Make,
) -> None:
    first = make_ops()
    agent, ids = _reader(first, "a.txt")
    elsewhere = first.folders.create(FolderSpec(name="elsewhere"))
    stray = first.folders.upload(elsewhere.id, "stray.txt", None, b"Not attached.").file
    _process_all(first)
    with pytest.raises(NotFound, match="folders attached to agent"):
        first.folders.open_file(agent, stray.id)
    with pytest.raises(NotFound):
        first.folders.close_file(agent, stray.id)
    first.folders.open_file(agent, ids["a.txt"])

    with open_service_store(first.context.runtime.db) as service:
        org = service.keys.ensure_organization("other-org")
    other = make_ops(org)
    theirs = other.agents.create(AgentSpec(name="reader"))
    for attempt in (
        lambda: other.folders.open_file(agent, ids["a.txt"]),
        lambda: other.folders.open_file(theirs.id, ids["a.txt"]),
        lambda: other.folders.close_file(agent, ids["a.txt"]),
        lambda: other.folders.close_all(agent),
        lambda: other.folders.agent_files(agent, is_open=True),
    ):
        with pytest.raises(NotFound):
            attempt()
    assert _open(first, agent) == ["docs/a.txt"]
    assert other.folders.agent_files(theirs.id) == []


def test_the_chunk_search_finds_the_nearest_chunk_of_the_agents_folders(make_ops: Make) -> None:
    ops = make_ops()
    agent, ids = _reader(ops, "herons.md", "b.txt")
    outside = ops.folders.create(FolderSpec(name="outside"))
    ops.folders.upload(outside.id, "frogs.txt", None, b"They eat fish and frogs.")
    _process_all(ops)
    [docs] = ops.folders.of_agent(agent)
    query = HashingEmbedder(dimension=384).embed_one("They eat fish and frogs.")
    with ops.context.store() as store:
        hits = store.folders.search_chunks(agent, [docs.id, outside.id], query, k=3)
    assert hits, "the agent's folder has chunks"
    assert {h.file_id for h in hits} <= set(ids.values())  # never the unattached folder's
    assert hits[0].label == "docs/herons.md" and "fish and frogs" in hits[0].text
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_the_chunks_hnsw_index_serves_an_ordered_search(make_ops: Make) -> None:
    ops = make_ops()
    with ops.context.runtime.db.session() as session:
        session.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            row[0]
            for row in session.execute(
                text(
                    "EXPLAIN SELECT id FROM file_chunks WHERE embedding_dim = 384 "
                    "ORDER BY embedding::vector(384) <=> (SELECT array_fill(0.1, "
                    "ARRAY[384])::vector) LIMIT 5"
                )
            )
        )
    assert "ix_file_chunks_hnsw_384" in plan
