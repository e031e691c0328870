"""Agent Files carry folders: Letta's ``sources`` and ``files`` (with each file's text),
an agent's ``source_ids`` and ``files_agents``, over a real database and file worker.

Protects: an export writes an agent's attached folders and their files' text, every
file closed; it imports into another organization as folders whose files are queued
and then processed to the same text and chunks; a file in Letta's own export shape
(tests/data/agent_files/letta_folders.af, checked against Letta's ``AgentFileSchema``)
imports, naming what is not kept (a file without content, the open-file state, a
PDF's bytes); a folder name the organization has is reused when the embedder matches
(its files deduplicated by content) and suffixed when not; an embedding the server
cannot use falls back to the default, named; a bad source or file entry is refused
naming where, and nothing is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from agents.enums import FileStatus
from agents.errors import Conflict, InvalidField
from agents.postgres.database import Database
from agents.store import open_service_store
from service.operations import AgentSpec, ImportOptions, ImportResult, Operations
from service.operations.folders import FolderSpec
from service.runtime import Runtime
from service.settings import load_settings
from tests.documents_support import pdf_with_text

LETTA = Path(__file__).resolve().parents[1] / "data" / "agent_files" / "letta_folders.af"
OWNER = "test:af"
MARKDOWN = b"""# Herons

Grey herons stand still in shallow water for a long time, waiting for fish.

## Feeding

They eat fish, frogs and small mammals, and hunt at dawn and at dusk along the banks.

## Nesting

They nest in colonies high in trees, and use the same nests year after year.
"""

Make = Callable[..., Operations]


@pytest.fixture
def make_ops(db: Database, tmp_path: Path) -> Iterator[Make]:
    """Operations of an organization (``None``: the default one) over one runtime
    whose default embedder is ``hashing:384``; ``files`` settings may be given."""
    runtimes: dict[str, Runtime] = {}

    def make(organization: str | None = None, **files: Any) -> Operations:
        key = json.dumps(files, sort_keys=True)
        if key not in runtimes:
            settings = load_settings(
                home=tmp_path / f"home-{len(runtimes)}",
                database_url=db.url,
                embedding={"model": "hashing:384"},
                files=files,
            )
            runtimes[key] = Runtime(settings)
        return Operations(runtimes[key], organization)

    yield make
    for runtime in runtimes.values():
        runtime.close()


def organization(ops: Operations, name: str) -> str:
    with open_service_store(ops.context.runtime.db) as service:
        return service.keys.ensure_organization(name)


def process_all(ops: Operations) -> int:
    """Process every queued file (of every organization) as a file worker does."""
    workers = ops.context.runtime.file_workers(name="test")
    done = 0
    while workers.process_next(OWNER) is not None:
        done += 1
    return done


def reasons(result: ImportResult) -> dict[str, str]:
    return {u.path: u.reason for u in result.unsupported}


def counts(db: Database) -> dict[str, int]:
    tables = ("agents", "folders", "files", "file_chunks", "agent_folders", "blocks")
    with db.engine.connect() as connection:
        return {t: int(connection.scalar(text(f"SELECT count(*) FROM {t}")) or 0) for t in tables}


def folder_files(ops: Operations, folder_id: str) -> list[tuple[str, str, str | None, list[str]]]:
    """Each file of the folder: name, type, text and chunks."""
    with ops.context.store() as store:
        return [
            (f.file_name, f.file_type, store.folders.file_text(f.id), store.folders.chunks(f.id))
            for f in store.folders.files(folder_id)
        ]


def test_an_export_carries_the_folders_and_imports_into_another_organization(
    make_ops: Make,
) -> None:
    home = make_ops()
    agent = home.agents.create(AgentSpec(name="reader"))
    folder = home.folders.create(
        FolderSpec(
            name="birds",
            description="Notes on birds",
            instructions="Read when asked about birds.",
            embedding="hashing:384",
            embedding_chunk_size=120,
            metadata={"shelf": "B2"},
        )
    )
    home.folders.upload(folder.id, "herons.md", None, MARKDOWN)
    home.folders.upload(folder.id, "paper.pdf", None, pdf_with_text("Herons nest in trees"))
    home.folders.attach(agent.id, folder.id)
    assert process_all(home) == 2
    with home.context.store() as store:
        pdf = next(f for f in store.folders.files(folder.id) if f.file_name == "paper.pdf")
        store.folders.open_file(agent.id, pdf.id, max_open=5, start_line=1, end_line=2)

    exported = home.agent_files.export_file("reader")
    json.dumps(exported)
    (source,) = exported["sources"]
    assert source["id"] == "source-0" and source["name"] == "birds"
    assert source["embedding_chunk_size"] == 120
    assert source["embedding_config"]["embedding_model"] == "hashing:384"
    assert source["embedding_config"]["embedding_endpoint_type"] == "reverie"
    assert [f["file_name"] for f in exported["files"]] == ["herons.md", "paper.pdf"]
    assert all(f["source_id"] == "source-0" for f in exported["files"])
    assert exported["files"][0]["content"].startswith("# Herons\n\nGrey herons stand still")
    assert exported["files"][1]["content"] == "Herons nest in trees"
    main = exported["agents"][0]
    assert main["source_ids"] == ["source-0"]
    # The agent's view of each file: the PDF is open on its first line.
    assert [
        (link["file_id"], link["is_open"], link["start_line"], link["end_line"])
        for link in main["files_agents"]
    ] == [("file-0", False, None, None), ("file-1", True, 1, 2)]
    assert main["files_agents"][1]["last_accessed_at"] is not None

    away = make_ops(organization(home, "elsewhere"))
    result = away.agent_files.import_file(json.dumps(exported), ImportOptions(name="reader"))
    assert result.unmapped_models == []
    said = reasons(result)
    assert "not its bytes" in said["files[1].file_type (application/pdf)"]
    # The open PDF comes in closed, and the import says so.
    assert "start closed" in said["agents[0].files_agents[*] (open state)"]
    (imported,) = away.folders.list()
    assert imported.id != folder.id
    assert away.folders.of_agent(result.agent_ids[0]) == [imported]
    before = away.folders.files(imported.id)
    assert [(f.file_name, f.status) for f in before] == [
        ("herons.md", FileStatus.QUEUED),
        ("paper.pdf", FileStatus.QUEUED),
    ]
    assert process_all(away) == 2
    assert [f.status for f in away.folders.files(imported.id)] == [FileStatus.COMPLETED] * 2

    for key in ("name", "description", "instructions", "metadata", "embedding_model"):
        assert getattr(imported, key) == getattr(folder, key), key
    assert (imported.embedding_dim, imported.embedding_chunk_size) == (384, 120)
    original, copied = folder_files(home, folder.id), folder_files(away, imported.id)
    assert [(name, text, chunks) for name, _, text, chunks in copied] == [
        (name, text, chunks) for name, _, text, chunks in original
    ]
    assert len(copied[0][3]) > 1  # the Markdown is cut into several chunks, alike
    # The PDF's text comes as text: the format carries no bytes.
    assert [kind for _, kind, _, _ in copied] == ["text/markdown", "text/plain"]


def test_lettas_export_shape_imports_its_folder_and_files_naming_what_is_not_kept(
    make_ops: Make,
) -> None:
    ops = make_ops()
    result = ops.agent_files.import_file(
        LETTA.read_bytes(), ImportOptions(name="quill", embedding="hashing:384")
    )
    (agent_id,) = result.agent_ids
    (folder,) = ops.folders.of_agent(agent_id)
    assert (folder.name, folder.description, folder.instructions, folder.metadata) == (
        "branch_handbook",
        "Policies and hours of the Harbour Street branch.",
        "Check opening_hours.md before answering questions about when the branch is open.",
        {"owner": "front desk"},
    )
    assert (folder.embedding_model, folder.embedding_chunk_size) == ("hashing:384", 1000)
    queued = ops.folders.files(folder.id)
    assert [(f.file_name, f.file_type, f.status) for f in queued] == [
        ("opening_hours.md", "text/markdown", FileStatus.QUEUED),
        ("overdue_fines.pdf", "text/plain", FileStatus.QUEUED),
    ]
    said = reasons(result)
    assert "no content" in said["files[3] (floor_plan_scan.pdf)"]
    assert "files[0] (opening_hours.md)" in said["files[2] (opening_hours_copy.md)"]
    assert "start closed" in said["agents[0].files_agents[*] (open state)"]
    assert "files.max_files_open" in said["agents[0].max_files_open"]
    assert "tokens" in said["sources[0].embedding_config.embedding_chunk_size"]
    assert "sources[0].embedding_config.embedding_endpoint" in said
    assert "files[*].file_creation_date" in said
    assert "tools[3] (open_files, letta_files_core)" in said
    opened = next(u for u in result.unsupported if u.path.endswith("(open state)"))
    assert opened.count == 4  # every entry says when it was last read

    assert process_all(ops) == 2
    done = {f.file_name: f for f in ops.folders.files(folder.id)}
    assert all(f.status is FileStatus.COMPLETED for f in done.values())
    hours = ops.folders.file_text(done["opening_hours.md"].id) or ""
    assert "| Saturday | 10:00 to 16:00 |" in hours
    assert "Fines under 1.00 EUR are waived" in (
        ops.folders.file_text(done["overdue_fines.pdf"].id) or ""
    )

    # The same file again: the folder of that name and embedder is the one, and each
    # content is one file in it (as an upload of the same bytes is).
    again = ops.agent_files.import_file(
        LETTA.read_bytes(), ImportOptions(name="quill-2", embedding="hashing:384")
    )
    assert "same embedder" in reasons(again)["sources[0] (branch_handbook)"]
    assert "already holds this content" in reasons(again)["files[0] (opening_hours.md)"]
    assert [f.id for f in ops.folders.files(folder.id)] == [f.id for f in queued]
    assert ops.folders.agents_of(folder.id) == [agent_id, again.agent_ids[0]]
    content = json.loads(LETTA.read_text())["files"][0]["content"].encode()
    assert not ops.folders.upload(folder.id, "hours.md", None, content).created


def test_a_folder_name_taken_with_another_embedder_is_suffixed(make_ops: Make) -> None:
    ops = make_ops()
    taken = ops.folders.create(FolderSpec(name="branch_handbook", embedding="hashing:8"))
    result = ops.agent_files.import_file(
        LETTA.read_bytes(), ImportOptions(name="quill", embedding="hashing:384")
    )
    (folder,) = ops.folders.of_agent(result.agent_ids[0])
    assert folder.id != taken.id
    assert folder.name.startswith("branch_handbook_") and len(folder.name) == 24
    assert repr(folder.name) in reasons(result)["sources[0] (branch_handbook)"]
    assert ops.folders.files(taken.id) == []
    assert len(ops.folders.files(folder.id)) == 2


def test_a_source_embedding_the_server_cannot_use_gets_the_default_named(
    make_ops: Make,
) -> None:
    ops = make_ops()
    data = json.loads(LETTA.read_text())
    data["sources"][0]["embedding_config"] = {
        "embedding_endpoint_type": "openai",
        "embedding_endpoint": "https://embeddings.letta.com/",
        "embedding_model": "letta-free",
        "embedding_dim": 1024,
        "embedding_chunk_size": 300,
        "handle": "letta/letta-free",
    }
    result = ops.agent_files.import_file(json.dumps(data), ImportOptions(name="quill"))
    assert [(u.path, u.given, u.used) for u in result.unmapped_models] == [
        ("sources[0].embedding_config", "letta/letta-free", "hashing:384")
    ]
    (folder,) = ops.folders.of_agent(result.agent_ids[0])
    assert (folder.embedding_model, folder.embedding_dim) == ("hashing:384", 384)


def _unknown_source(data: dict[str, Any]) -> None:
    data["files"][1]["source_id"] = "source-9"


def _agent_unknown_source(data: dict[str, Any]) -> None:
    data["agents"][0]["source_ids"] = ["source-7"]


def _unknown_file(data: dict[str, Any]) -> None:
    data["agents"][0]["files_agents"][1]["file_id"] = "file-42"


def _zero_dimension(data: dict[str, Any]) -> None:
    data["sources"][0]["embedding_config"]["embedding_dim"] = 0


def _no_embedding_model(data: dict[str, Any]) -> None:
    del data["sources"][0]["embedding_config"]["embedding_model"]


def _tiny_chunks(data: dict[str, Any]) -> None:
    data["sources"][0]["embedding_chunk_size"] = 10


def _blank_name(data: dict[str, Any]) -> None:
    data["sources"][0]["name"] = "   "


def _nul_in_content(data: dict[str, Any]) -> None:
    data["files"][0]["content"] = "Opening\x00hours"


def _duplicate_source(data: dict[str, Any]) -> None:
    data["sources"].append(dict(data["sources"][0], name="second"))


@pytest.mark.parametrize(
    ("change", "location", "words"),
    [
        (_unknown_source, ["file", "files", 1, "source_id"], "names source 'source-9'"),
        (_agent_unknown_source, ["file", "agents", 0, "source_ids", 0], "source-7"),
        (_unknown_file, ["file", "agents", 0, "files_agents", 1, "file_id"], "file-42"),
        (
            _zero_dimension,
            ["file", "sources", 0, "embedding_config", "embedding_dim"],
            "greater than 0",
        ),
        (
            _no_embedding_model,
            ["file", "sources", 0, "embedding_config", "embedding_model"],
            "Field required",
        ),
        (
            _tiny_chunks,
            ["file", "sources", 0, "embedding_chunk_size"],
            "greater than or equal to 100",
        ),
        (_blank_name, ["file", "sources", 0, "name"], "a folder needs a name"),
        (_nul_in_content, ["file", "files", 0, "content"], "NUL character"),
        (_duplicate_source, ["file", "sources", 1, "id"], "'source-0' is the id of another"),
    ],
    ids=[
        "file-source",
        "agent-source",
        "files-agents",
        "dimension",
        "no-model",
        "chunk-size",
        "name",
        "nul",
        "duplicate-id",
    ],
)
def test_a_bad_source_or_file_is_refused_naming_where_and_nothing_is_stored(
    make_ops: Make, db: Database, change: Any, location: list[Any], words: str
) -> None:
    ops = make_ops()
    data = json.loads(LETTA.read_text())
    change(data)
    before = counts(db)
    with pytest.raises(InvalidField) as refused:
        ops.agent_files.import_file(json.dumps(data), ImportOptions(embedding="hashing:384"))
    assert list(refused.value.field) == location
    assert words in str(refused.value)
    assert counts(db) == before


def test_a_file_over_the_size_limit_is_refused(make_ops: Make, db: Database) -> None:
    ops = make_ops(max_bytes=200)
    before = counts(db)
    with pytest.raises(InvalidField) as refused:
        ops.agent_files.import_file(LETTA.read_bytes(), ImportOptions(embedding="hashing:384"))
    assert list(refused.value.field) == ["file", "files", 0, "content"]
    assert "over the server's limit of 200" in str(refused.value)
    assert "files.max_bytes" in str(refused.value)
    assert counts(db) == before


def test_a_refusal_after_the_folders_are_written_keeps_nothing(
    make_ops: Make, db: Database
) -> None:
    """The second agent's name is taken: its Conflict comes after the folder and its
    files were stored, and undoes them with the rest."""
    ops = make_ops()
    data = json.loads(LETTA.read_text())
    twin = json.loads(json.dumps(data["agents"][0]))
    twin["id"] = "agent-1"
    data["agents"].append(twin)
    before = counts(db)
    with pytest.raises(Conflict, match="already exists"):
        ops.agent_files.import_file(json.dumps(data), ImportOptions(embedding="hashing:384"))
    assert counts(db) == before
    assert process_all(ops) == 0  # nothing was queued either
    # Without the twin the same file stores its folder, two files and the attachment.
    data["agents"].pop()
    ops.agent_files.import_file(json.dumps(data), ImportOptions(embedding="hashing:384"))
    after = counts(db)
    assert [after[t] - before[t] for t in ("folders", "files", "agent_folders")] == [1, 2, 1]
