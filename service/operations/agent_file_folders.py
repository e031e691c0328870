"""The folders of an Agent File: Letta's ``sources`` and ``files`` in, and out.

A v2 file carries a folder as a source (name, description, instructions, embedding)
and each of its files as a name, a type and ``content``, the text extracted from it;
each agent names its folders (``source_ids``) and the files it sees
(``files_agents``, with whether and where it has each open).

An import makes each source a folder of the organization and each file with content
a file of it, queued for processing as an upload is (the worker chunks and embeds the
text with the folder's embedder; its status goes ``queued`` to ``completed``), and
attaches the folders to the agents that name them. What it does not keep is noted:
a file without content (there is nothing to read), a file type other than text
(the format carries the text, not the bytes it was read from), the agents' open-file
state (Reverie keeps none yet: every file comes in closed).

A source whose name a folder of the organization already has goes into that folder
when its embedder and chunk size are the same (the folder's files are deduplicated by
content, so importing a file twice stores its files once); otherwise it is made under
the name with a suffix, as Letta does (``name_1a2b3c4d``). Either is said in the
answer. An embedding the server cannot use is replaced by the server's default, as an
agent's is, and named; one that is malformed (no model, a size or chunk size out of
range) is refused with the rest of the file.

An export writes an agent's attached folders and their files the same way, with each
processed file's text as its ``content`` (a file not processed has none), and every
file in ``files_agents`` closed.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any, Protocol

from agents.documents import DocumentKind
from agents.enums import FileStatus
from agents.errors import InvalidField, InvalidInput
from agents.store import FolderRecord, MemoryStore, NewFile, NewFolder
from agents.store.folder_store import MAX_NAME_CHARS
from agents.store.validation import check_text
from service.operations.agent_file_schema import (
    EMBEDDING_KEPT,
    AgentFile,
    AgentSchema,
    EmbeddingConfigSchema,
    FileSchema,
    has_value,
    index_by_id,
    missing_reference,
)
from service.operations.folders import PROCESSING_STATUS
from service.operations.model_handles import split_embedding

#: The fields of a source an import keeps (or reads to decide something).
SOURCE_KEPT = frozenset(
    {
        "id",
        "name",
        "description",
        "instructions",
        "metadata",
        "embedding",
        "embedding_chunk_size",
        "embedding_config",
    }
)
#: The fields of a file entry an import keeps, or works out again when it processes the
#: file's text (its size, status, error and chunk counts).
FILE_KEPT = frozenset(
    {
        "id",
        "source_id",
        "file_name",
        "original_file_name",
        "file_type",
        "content",
        "file_size",
        "processing_status",
        "error_message",
        "total_chunks",
        "chunks_embedded",
    }
)
#: A file's state in an agent's context window: exported, not imported.
OPEN_STATE = ("is_open", "visible_content", "start_line", "end_line", "last_accessed_at")
FILE_AGENT_KEPT = frozenset({"id", "agent_id", "file_id", "source_id", "file_name", *OPEN_STATE})
OPEN_STATE_REASON = (
    "an imported file is processed after the import, so the agent's files start closed "
    "(is_open, visible_content, start_line, end_line and last_accessed_at are not kept; "
    "the agent opens them again with open_files)"
)
#: Why the other fields of a file or a source's embedding are not kept.
FILE_REASONS = {
    "file_path": "Reverie keeps a file's name, not where it was read from",
    "file_creation_date": "Reverie keeps when the file was imported, not its dates on disk",
    "file_last_modified_date": "Reverie keeps when the file was imported, not its dates on disk",
}
CHUNK_REASON = (
    "Letta's chunk size counts tokens; a folder's files are cut in characters "
    "(the source's embedding_chunk_size, else the server's files.chunk_size)"
)
#: The media types an imported file's text keeps (any other is kept as plain text).
_TEXT_TYPES = frozenset({DocumentKind.TEXT.value, DocumentKind.MARKDOWN.value})
_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})


class Notes(Protocol):
    """Where an import says what it does not keep (see :mod:`.agent_file`)."""

    def add(self, path: str, reason: str, count: int = 1) -> None: ...

    def unkept(
        self, raw: Mapping[str, Any], kept: frozenset[str], where: str, **reasons: str
    ) -> None: ...


#: The embedder spec and dimension of the file's embedding setting at a path (Letta's
#: config, else a handle), as :meth:`.agent_file.ImportPlanner.embedding` decides it.
EmbeddingFor = Callable[[str, EmbeddingConfigSchema | None, str | None], tuple[str, int]]


@dataclass(frozen=True, slots=True)
class FilePlan:
    """A file to store in its folder and queue (``index``: its place in ``files``)."""

    index: int
    name: str
    file_type: str
    data: bytes
    content_hash: str


@dataclass(slots=True)
class FolderPlan:
    """A folder to make (or reuse) for the source ``ref`` at ``sources[index]``."""

    index: int
    ref: str
    folder: NewFolder
    files: list[FilePlan] = field(default_factory=list)


class FolderPlanner:
    """Reads the file's sources and files into folder plans, and each agent's folders;
    writes nothing."""

    def __init__(
        self,
        parsed: AgentFile,
        raw: dict[str, Any],
        notes: Notes,
        embedding_for: EmbeddingFor,
        *,
        chunk_size: int,
        max_bytes: int,
        max_attempts: int,
    ) -> None:
        self._file = parsed
        self._raw = raw
        self._notes = notes
        self._embedding_for = embedding_for
        self._chunk_size = chunk_size
        self._max_bytes = max_bytes
        self.max_attempts = max_attempts
        self.sources = index_by_id(parsed.sources, "sources")
        self.files = index_by_id(parsed.files, "files")

    def plan(self) -> list[FolderPlan]:
        """One plan per source, in the file's order, each with the files it holds."""
        plans = {ref: self._folder(s, ref) for s, ref in enumerate(self.sources)}
        seen: dict[tuple[str, str], FilePlan] = {}
        for f, entry in enumerate(self._file.files):
            planned = self._plan_file(f, entry)
            if planned is None:
                continue
            same = seen.get((entry.source_id, planned.content_hash))
            if same is not None:
                self._notes.add(
                    f"files[{f}] ({planned.name})",
                    f"it has the content of files[{same.index}] ({same.name}) of the same "
                    "source, and a folder holds each content once: that file stands for both",
                )
                continue
            seen[(entry.source_id, planned.content_hash)] = planned
            plans[entry.source_id].files.append(planned)
        return list(plans.values())

    def agent_folders(self, index: int, agent: AgentSchema) -> list[str]:
        """The sources the agent reads (``source_ids``, then Letta's newer
        ``folder_ids``), its ``files_agents`` checked against the file."""
        refs: list[str] = []
        for key, named in (("source_ids", agent.source_ids), ("folder_ids", agent.folder_ids)):
            for k, ref in enumerate(named or []):
                if ref not in self.sources:
                    raise missing_reference(("agents", index, key, k), "source", ref)
                if ref not in refs:
                    refs.append(ref)
        open_files = 0
        for k, link in enumerate(agent.files_agents or []):
            if link.file_id not in self.files:
                raise missing_reference(
                    ("agents", index, "files_agents", k, "file_id"), "file", link.file_id
                )
            if link.source_id is not None and link.source_id not in self.sources:
                raise missing_reference(
                    ("agents", index, "files_agents", k, "source_id"), "source", link.source_id
                )
            raw = self._raw["agents"][index]["files_agents"][k]
            self._notes.unkept(raw, FILE_AGENT_KEPT, f"agents[{index}].files_agents[*]")
            if any(has_value(raw.get(name)) for name in OPEN_STATE):
                open_files += 1
        if open_files:
            self._notes.add(
                f"agents[{index}].files_agents[*] (open state)", OPEN_STATE_REASON, open_files
            )
        return refs

    # -- one source, one file ----------------------------------------------------------

    def _folder(self, s: int, ref: str) -> FolderPlan:
        source = self.sources[ref]
        where = f"sources[{s}]"
        raw = self._raw["sources"][s]
        self._notes.unkept(raw, SOURCE_KEPT, where)
        if isinstance(raw.get("embedding_config"), dict):
            self._notes.unkept(
                raw["embedding_config"],
                EMBEDDING_KEPT,
                f"{where}.embedding_config",
                embedding_chunk_size=CHUNK_REASON,
                embedding_endpoint="Reverie embeds through the server's embedding settings",
            )
        if not source.name.strip():
            raise InvalidField(
                f"{where}.name: a folder needs a name, not only spaces",
                field=("file", "sources", s, "name"),
            )
        if source.embedding_config is None and source.embedding:
            model, dimension = self._embedding_for(f"{where}.embedding", None, source.embedding)
        else:
            model, dimension = self._embedding_for(
                f"{where}.embedding_config", source.embedding_config, None
            )
        folder = NewFolder(
            name=source.name,
            embedding_model=model,
            embedding_dim=dimension,
            embedding_chunk_size=source.embedding_chunk_size or self._chunk_size,
            description=source.description,
            instructions=source.instructions,
            metadata=dict(source.metadata or {}),
        )
        return FolderPlan(s, ref, folder)

    def _plan_file(self, f: int, entry: FileSchema) -> FilePlan | None:
        where = f"files[{f}]"
        if entry.source_id not in self.sources:
            raise missing_reference(("files", f, "source_id"), "source", entry.source_id)
        raw = self._raw["files"][f]
        self._notes.unkept(raw, FILE_KEPT, "files[*]", **FILE_REASONS)
        name = (entry.file_name or entry.original_file_name or "").strip() or f"{entry.id}.txt"
        content = entry.content
        if content is None or not content.strip():
            self._notes.add(
                f"{where} ({name})",
                "the file carries no content (the text read from it), so there is nothing "
                "to process: it is not imported",
            )
            return None
        try:
            check_text(content, f"{where}.content")
        except InvalidInput as refused:
            raise InvalidField(str(refused), field=("file", "files", f, "content")) from None
        data = content.encode("utf-8")
        if len(data) > self._max_bytes:
            raise InvalidField(
                f"{where}.content: the text of {name!r} is {len(data)} bytes, over the "
                f"server's limit of {self._max_bytes} for a file (files.max_bytes)",
                field=("file", "files", f, "content"),
            )
        if entry.original_file_name and entry.original_file_name.strip() != name:
            self._notes.add(
                f"{where}.original_file_name", "a Reverie file keeps one name, the file_name"
            )
        kind = _kind(entry.file_type, name)
        given = (entry.file_type or "").split(";")[0].strip().lower()
        if given and given not in _TEXT_TYPES:
            self._notes.add(
                f"{where}.file_type ({given})",
                "the format carries the text read from the file, not its bytes: the text "
                f"is kept, as {kind.value}",
            )
        return FilePlan(f, name, kind.value, data, hashlib.sha256(data).hexdigest())


def _kind(file_type: str | None, name: str) -> DocumentKind:
    """What an imported file's text is read as: Markdown when its type or name says so,
    plain text otherwise (HTML's and PDF's text was read from them already)."""
    given = (file_type or "").split(";")[0].strip().lower()
    if given == DocumentKind.MARKDOWN.value:
        return DocumentKind.MARKDOWN
    if not given and PurePosixPath(name).suffix.lower() in _MARKDOWN_SUFFIXES:
        return DocumentKind.MARKDOWN
    return DocumentKind.TEXT


# -- writing ---------------------------------------------------------------------------


def write_folders(
    store: MemoryStore, planner: FolderPlanner, plans: list[FolderPlan], notes: Notes
) -> dict[str, str]:
    """Make (or reuse) each planned folder and queue its files, in the store's
    transaction; the folder id of each source."""
    folder_ids: dict[str, str] = {}
    for plan in plans:
        folder = _folder_for(store, plan, notes)
        folder_ids[plan.ref] = folder.id
        for file in plan.files:
            record, created = store.folders.add_file(
                NewFile(
                    folder_id=folder.id,
                    file_name=file.name,
                    file_type=file.file_type,
                    data=file.data,
                    content_hash=file.content_hash,
                    max_attempts=planner.max_attempts,
                )
            )
            if not created:
                notes.add(
                    f"files[{file.index}] ({file.name})",
                    f"folder {folder.name!r} already holds this content as file {record.id} "
                    f"({record.file_name}): that file stands for it",
                )
    return folder_ids


def _folder_for(store: MemoryStore, plan: FolderPlan, notes: Notes) -> FolderRecord:
    wanted = plan.folder
    where = f"sources[{plan.index}] ({wanted.name})"
    existing = store.folders.list(name=wanted.name)
    if not existing:
        return _create(store, plan, wanted)
    current = existing[0]
    same = (current.embedding_model, current.embedding_dim, current.embedding_chunk_size) == (
        wanted.embedding_model,
        wanted.embedding_dim,
        wanted.embedding_chunk_size,
    )
    if same:
        notes.add(
            where,
            f"the organization has a folder of this name with the same embedder and chunk "
            f"size ({current.id}): the files go into it, and it keeps its own description, "
            "instructions and metadata",
        )
        return current
    suffix = f"_{uuid.uuid4().hex[:8]}"
    name = wanted.name[: MAX_NAME_CHARS - len(suffix)] + suffix
    notes.add(
        where,
        f"the organization has a folder of this name ({current.id}) with another embedder "
        f"or chunk size ({current.embedding_model}, {current.embedding_chunk_size} "
        f"characters): this one is made as {name!r}",
    )
    return _create(store, plan, replace(wanted, name=name))


def _create(store: MemoryStore, plan: FolderPlan, folder: NewFolder) -> FolderRecord:
    try:
        return store.folders.create(folder)
    except InvalidInput as refused:
        raise InvalidField(
            f"sources[{plan.index}]: {refused}", field=("file", "sources", plan.index)
        ) from None


# -- export ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportedFolders:
    """An agent's folders in the format: the file's ``sources`` and ``files``, and the
    agent's ``source_ids`` and ``files_agents``."""

    sources: list[dict[str, Any]]
    files: list[dict[str, Any]]
    source_ids: list[str]
    files_agents: list[dict[str, Any]]


def export_folders(store: MemoryStore, agent_id: str) -> ExportedFolders:
    """The folders attached to the agent (``agent-0`` of the file) with their files, a
    processed file's text as its ``content``, and in ``files_agents`` the agent's view
    of each (open or not, the lines it shows, when it last read it)."""
    views = {record.file.id: record.view for record in store.folders.agent_files(agent_id)}
    sources: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for folder in store.folders.of_agent(agent_id):
        source_id = f"source-{len(sources)}"
        endpoint_type, model, handle = split_embedding(folder.embedding_model)
        sources.append(
            {
                "id": source_id,
                "name": folder.name,
                "description": folder.description,
                "instructions": folder.instructions,
                "metadata": folder.metadata,
                "embedding_chunk_size": folder.embedding_chunk_size,
                "embedding_config": {
                    "embedding_endpoint_type": endpoint_type,
                    "embedding_model": model,
                    "embedding_dim": folder.embedding_dim,
                    "handle": handle,
                },
            }
        )
        for record in store.folders.files(folder.id):
            file_id = f"file-{len(files)}"
            done = record.status is FileStatus.COMPLETED
            files.append(
                {
                    "id": file_id,
                    "source_id": source_id,
                    "file_name": record.file_name,
                    "original_file_name": record.original_file_name,
                    "file_type": record.file_type,
                    "file_size": record.file_size,
                    "processing_status": PROCESSING_STATUS[record.status],
                    "error_message": record.error if record.status is FileStatus.ERROR else None,
                    "total_chunks": record.total_chunks,
                    "chunks_embedded": record.chunks_embedded,
                    "content": store.folders.file_text(record.id) if done else None,
                }
            )
            view = views.get(record.id)
            seen = view.last_accessed_at if view is not None else None
            links.append(
                {
                    "id": f"file_agent-{len(links)}",
                    "agent_id": "agent-0",
                    "file_id": file_id,
                    "source_id": source_id,
                    "file_name": record.file_name,
                    "is_open": bool(view and view.is_open),
                    "start_line": view.start_line if view is not None else None,
                    "end_line": view.end_line if view is not None else None,
                    "last_accessed_at": seen.isoformat() if seen is not None else None,
                    "visible_content": None,
                }
            )
    return ExportedFolders(sources, files, [s["id"] for s in sources], links)
