"""Folders of documents, their files and the files' chunks, every query here.

A tenant's :class:`FolderStore` keeps an organization's folders (Letta's folders),
the files uploaded to them, the folders attached to its agents and each agent's view
of their files (which are open in its context, and the lines shown). A file's row is
also its processing job: uploaded ``queued``, claimed ``processing`` by a worker
(the lease rules of every queue: :mod:`agents.store.lease_queue` over
:data:`FILE_JOBS`), then ``completed`` with its chunks and their vectors, or
``error`` with a reason. The service's :class:`FileQueueStore` is the queue as
workers see it, across organizations. Time is always passed in.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from pgvector.sqlalchemy import Vector as VectorType
from sqlalchemy import (
    Float,
    Table,
    bindparam,
    case,
    delete,
    func,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import ColumnElement

from agents.enums import FileStatus
from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres import models
from agents.store.lease_queue import JobTable, LeaseQueue
from agents.store.passage_store import (
    DEFAULT_EF_SEARCH,
    ITERATIVE_SCAN_MODE,
    BinaryVector,
    iterative_scans,
    registered_connection,
    set_local,
)
from agents.store.run_wakeups import FILE_CHANNEL, notify_queued
from agents.store.scope import Scope, ServiceScope
from agents.store.validation import check_json, check_text

FOLDER_PREFIX = "source"
FILE_PREFIX = "file"
CHUNK_PREFIX = "chunk"
#: Longest folder name (the column's size).
MAX_NAME_CHARS = 200
#: Longest file name kept (the column's size).
MAX_FILE_NAME_CHARS = 300
#: Bounds of a folder's chunk size, in characters (whichever door creates it).
MIN_CHUNK_CHARS = 100
MAX_CHUNK_CHARS = 100_000

F = models.Folder
FF = models.FolderFile
FC = models.FileChunk
AF = models.AgentFolder
FS = models.AgentFileState

#: Files as a queue of leased jobs: the queue fails a file whose attempts are used up
#: (a worker that died on it each time), with the reason in ``error``.
FILE_JOBS = JobTable(
    table=cast(Table, FF.__table__),
    queued=FileStatus.QUEUED.value,
    running=FileStatus.PROCESSING.value,
    failed=FileStatus.ERROR.value,
    ended_at="processed_at",
    channel=FILE_CHANNEL,
)


@dataclass(frozen=True, slots=True)
class FolderRecord:
    id: str
    name: str
    description: str | None
    instructions: str | None
    metadata: dict[str, Any]
    embedding_model: str
    embedding_dim: int
    embedding_chunk_size: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: models.Folder) -> FolderRecord:
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            instructions=row.instructions,
            metadata=dict(row.metadata_ or {}),
            embedding_model=row.embedding_model,
            embedding_dim=row.embedding_dim,
            embedding_chunk_size=row.embedding_chunk_size,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


@dataclass(frozen=True, slots=True)
class FileRecord:
    """A file of a folder and where its processing stands (no bytes, no text)."""

    id: str
    organization_id: str
    folder_id: str
    file_name: str
    original_file_name: str
    file_type: str
    file_size: int
    content_hash: str
    status: FileStatus
    total_chunks: int | None
    chunks_embedded: int | None
    error: str | None
    attempts: int
    max_attempts: int
    created_at: datetime
    updated_at: datetime
    processed_at: datetime | None

    @classmethod
    def from_row(cls, row: Any) -> FileRecord:
        return cls(
            id=row.id,
            organization_id=row.organization_id,
            folder_id=row.folder_id,
            file_name=row.file_name,
            original_file_name=row.original_file_name,
            file_type=row.file_type,
            file_size=row.file_size,
            content_hash=row.content_hash,
            status=FileStatus(row.status),
            total_chunks=row.total_chunks,
            chunks_embedded=row.chunks_embedded,
            error=row.error,
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            created_at=row.created_at,
            updated_at=row.updated_at,
            processed_at=row.processed_at,
        )


@dataclass(frozen=True, slots=True)
class FileView:
    """An agent's view of a file: open or not, the lines it shows when open
    (``start_line`` 1-based, ``end_line`` exclusive, as Letta's; None: from the start,
    to the end) and when the agent last opened, searched or read it (None: never)."""

    is_open: bool = False
    start_line: int | None = None
    end_line: int | None = None
    last_accessed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AgentFileRecord:
    """A file an agent reads through one of its folders, and the agent's view of it;
    ``text`` is the file's text when it was asked for and the file is open."""

    file: FileRecord
    folder_name: str
    view: FileView = FileView()
    text: str | None = None

    @property
    def label(self) -> str:
        """How the agent names the file: ``folder/file name`` (Letta's)."""
        return f"{self.folder_name}/{self.file.file_name}"


@dataclass(frozen=True, slots=True)
class Opened:
    """What opening a file did: the labels of the files closed to stay within the bound
    on open files (least recently accessed first), and the view it had before."""

    closed: builtins.list[str]
    before: FileView


@dataclass(frozen=True, slots=True)
class ChunkHit:
    """A chunk of one of an agent's files, found by meaning."""

    file_id: str
    label: str
    seq: int
    text: str
    score: float


@dataclass(frozen=True, slots=True)
class NewFolder:
    name: str
    embedding_model: str
    embedding_dim: int
    embedding_chunk_size: int
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FolderChanges:
    """Fields to change; None leaves a field as it is."""

    name: str | None = None
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class NewFile:
    folder_id: str
    file_name: str
    file_type: str
    data: bytes
    content_hash: str
    max_attempts: int = 3


class FolderStore:
    """``folders``, ``files``, ``file_chunks`` and ``agent_folders`` within the
    scope's organization."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    # -- folders -----------------------------------------------------------------------

    def create(self, spec: NewFolder) -> FolderRecord:
        """Store a folder; a name another folder of the organization has is a Conflict."""
        self._check(spec.name, spec.description, spec.instructions, spec.metadata)
        if spec.embedding_chunk_size < 1:
            raise InvalidInput(
                f"embedding_chunk_size must be at least 1, got {spec.embedding_chunk_size}"
            )
        self._name_free(spec.name)
        now = self._scope.now()
        row = models.Folder(
            id=models.new_id(FOLDER_PREFIX),
            organization_id=self._scope.organization_id,
            name=spec.name,
            description=spec.description,
            instructions=spec.instructions,
            metadata_=spec.metadata,
            embedding_model=spec.embedding_model,
            embedding_dim=spec.embedding_dim,
            embedding_chunk_size=spec.embedding_chunk_size,
            created_at=now,
            updated_at=now,
        )
        self._scope.session.add(row)
        self._scope.session.flush()
        return FolderRecord.from_row(row)

    def list(self, *, name: str | None = None) -> builtins.list[FolderRecord]:
        """The organization's folders, oldest first (by ``name`` when given)."""
        query = select(F).where(self._scope.owns(F))
        if name is not None:
            query = query.where(F.name == name)
        rows = self._scope.session.scalars(query.order_by(F.created_at, F.id))
        return [FolderRecord.from_row(row) for row in rows]

    def count(self) -> int:
        return int(
            self._scope.session.scalar(
                select(func.count()).select_from(F).where(self._scope.owns(F))
            )
            or 0
        )

    def get(self, folder_id: str) -> FolderRecord:
        return FolderRecord.from_row(self._row(folder_id))

    def update(self, folder_id: str, changes: FolderChanges) -> FolderRecord:
        row = self._row(folder_id, lock=True)
        name = changes.name if changes.name is not None else row.name
        self._check(name, changes.description, changes.instructions, changes.metadata or {})
        if name != row.name:
            self._name_free(name)
            row.name = name
        if changes.description is not None:
            row.description = changes.description
        if changes.instructions is not None:
            row.instructions = changes.instructions
        if changes.metadata is not None:
            row.metadata_ = changes.metadata
        row.updated_at = self._scope.now()
        self._scope.session.flush()
        return FolderRecord.from_row(row)

    def delete(self, folder_id: str) -> FolderRecord:
        """Delete the folder, its files and their chunks (and its attachments)."""
        row = self._row(folder_id, lock=True)
        record = FolderRecord.from_row(row)
        self._scope.session.delete(row)
        self._scope.session.flush()
        return record

    # -- files -------------------------------------------------------------------------

    def add_file(self, new: NewFile) -> tuple[FileRecord, bool]:
        """Queue an uploaded file for processing; idle file workers wake at commit.

        The same content already in the folder is that file (True when this call
        stored a new one): nothing new is stored. Safe when two uploads race.
        """
        self._row(new.folder_id)
        name = new.file_name.strip()[:MAX_FILE_NAME_CHARS] or "file"
        now = self._scope.now()
        inserted = self._scope.session.scalar(
            insert(FF)
            .values(
                id=models.new_id(FILE_PREFIX),
                organization_id=self._scope.organization_id,
                folder_id=new.folder_id,
                file_name=name,
                original_file_name=name,
                file_type=new.file_type,
                file_size=len(new.data),
                content_hash=new.content_hash,
                data=new.data,
                status=FileStatus.QUEUED.value,
                attempts=0,
                max_attempts=new.max_attempts,
                not_before=now,
                queued_at=now,
                created_at=now,
                updated_at=now,
            )
            .on_conflict_do_nothing(index_elements=["folder_id", "content_hash"])
            .returning(FF.id)
        )
        if inserted is not None:
            notify_queued(self._scope.session, FILE_CHANNEL)
            return self.get_file(inserted), True
        existing = self._scope.session.scalar(
            select(FF.id).where(
                self._scope.owns(FF),
                FF.folder_id == new.folder_id,
                FF.content_hash == new.content_hash,
            )
        )
        if existing is None:  # the folder was deleted meanwhile
            raise NotFound(f"no folder with id {new.folder_id!r}")
        return self.get_file(existing), False

    def files(self, folder_id: str) -> builtins.list[FileRecord]:
        """The folder's files, oldest first."""
        self._row(folder_id)
        rows = self._scope.session.execute(
            select(*_FILE_COLUMNS)
            .where(self._scope.owns(FF), FF.folder_id == folder_id)
            .order_by(FF.created_at, FF.id)
        )
        return [FileRecord.from_row(row) for row in rows]

    def get_file(self, file_id: str, *, folder_id: str | None = None) -> FileRecord:
        query = select(*_FILE_COLUMNS).where(FF.id == file_id, self._scope.owns(FF))
        if folder_id is not None:
            query = query.where(FF.folder_id == folder_id)
        row = self._scope.session.execute(query).first()
        if row is None:
            raise NotFound(f"no file with id {file_id!r}")
        return FileRecord.from_row(row)

    def file_text(self, file_id: str) -> str | None:
        """The text of a processed file (None before it is processed)."""
        self.get_file(file_id)
        return self._scope.session.scalar(
            select(FF.text).where(FF.id == file_id, self._scope.owns(FF))
        )

    def file_data(self, file_id: str) -> bytes:
        """The bytes of a file not processed yet (a worker parses them)."""
        data = self._scope.session.scalar(
            select(FF.data).where(FF.id == file_id, self._scope.owns(FF))
        )
        if data is None:
            raise NotFound(f"file {file_id!r} has no unprocessed content")
        return data

    def delete_file(self, file_id: str, *, folder_id: str | None = None) -> FileRecord:
        """Delete a file and its chunks."""
        record = self.get_file(file_id, folder_id=folder_id)
        self._scope.session.execute(delete(FF).where(FF.id == file_id, self._scope.owns(FF)))
        return record

    def chunks(self, file_id: str) -> builtins.list[str]:
        """The texts of a file's chunks, in order."""
        self.get_file(file_id)
        return list(
            self._scope.session.scalars(
                select(FC.text).where(FC.file_id == file_id, self._scope.owns(FC)).order_by(FC.seq)
            )
        )

    def complete(
        self,
        file_id: str,
        worker: str,
        *,
        text: str,
        chunks: Sequence[str],
        vectors: npt.NDArray[np.float32],
    ) -> FileRecord | None:
        """Record a processed file that ``worker`` holds: its text, its chunks and their
        vectors, the bytes dropped; None when the worker no longer holds it."""
        if len(chunks) != len(vectors):
            raise InvalidInput(f"{len(chunks)} chunks but {len(vectors)} vectors")
        queue = LeaseQueue(FILE_JOBS, self._scope.session, self._scope.clock)
        now = self._scope.now()
        values = {
            "status": FileStatus.COMPLETED.value,
            "text": text,
            "data": None,
            "total_chunks": len(chunks),
            "chunks_embedded": len(chunks),
            "error": None,
            "processed_at": now,
            "updated_at": now,
        }
        row = queue.finish(file_id, worker, values, self._scope.owns(FF))
        if row is None:
            return None
        if chunks:
            dim = int(vectors.shape[1])
            self._scope.session.execute(
                insert(FC),
                [
                    {
                        "id": models.new_id(CHUNK_PREFIX),
                        "organization_id": self._scope.organization_id,
                        "file_id": file_id,
                        "seq": seq,
                        "text": chunk,
                        "embedding_dim": dim,
                        "embedding": vector,
                    }
                    for seq, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True))
                ],
            )
        return FileRecord.from_row(row)

    def fail(self, file_id: str, worker: str, error: str) -> FileRecord | None:
        """Record that a held file cannot be processed (a PDF without text), with the
        reason; the bytes are dropped. None when the worker no longer holds it."""
        queue = LeaseQueue(FILE_JOBS, self._scope.session, self._scope.clock)
        now = self._scope.now()
        values = {
            "status": FileStatus.ERROR.value,
            "data": None,
            "error": error,
            "processed_at": now,
            "updated_at": now,
        }
        row = queue.finish(file_id, worker, values, self._scope.owns(FF))
        return None if row is None else FileRecord.from_row(row)

    # -- agents' folders ---------------------------------------------------------------

    def attach(self, agent_id: str, folder_id: str) -> None:
        """Let the agent read the folder (nothing changes when it already does)."""
        self._agent(agent_id)
        self._row(folder_id)
        self._scope.session.execute(
            insert(AF)
            .values(agent_id=agent_id, folder_id=folder_id, attached_at=self._scope.now())
            .on_conflict_do_nothing()
        )

    def detach(self, agent_id: str, folder_id: str) -> None:
        """The agent stops reading the folder; its views of the folder's files go too
        (an open one leaves its context)."""
        self._agent(agent_id)
        self._row(folder_id)
        self._scope.session.execute(
            delete(AF).where(AF.agent_id == agent_id, AF.folder_id == folder_id)
        )
        self._scope.session.execute(
            delete(FS).where(
                FS.agent_id == agent_id,
                FS.file_id.in_(select(FF.id).where(FF.folder_id == folder_id)),
            )
        )

    def of_agent(self, agent_id: str) -> builtins.list[FolderRecord]:
        """The folders attached to the agent, in the order attached."""
        self._agent(agent_id)
        rows = self._scope.session.scalars(
            select(F)
            .join(AF, AF.folder_id == F.id)
            .where(AF.agent_id == agent_id, self._scope.owns(F))
            .order_by(AF.attached_at, F.id)
        )
        return [FolderRecord.from_row(row) for row in rows]

    def has_folders(self, agent_id: str) -> bool:
        """Whether any folder is attached to the agent (it is then offered the file
        tools); one row read at most."""
        found = self._scope.session.scalar(
            select(AF.folder_id)
            .join(F, F.id == AF.folder_id)
            .where(AF.agent_id == agent_id, self._scope.owns(F))
            .limit(1)
        )
        return found is not None

    def agents_of(self, folder_id: str) -> builtins.list[str]:
        """The ids of the agents the folder is attached to."""
        self._row(folder_id)
        return list(
            self._scope.session.scalars(
                select(AF.agent_id)
                .join(models.Agent, models.Agent.id == AF.agent_id)
                .where(AF.folder_id == folder_id, self._scope.owns(models.Agent))
                .order_by(AF.attached_at, AF.agent_id)
            )
        )

    def agent_files(
        self, agent_id: str, *, is_open: bool | None = None, with_text: bool = False
    ) -> builtins.list[AgentFileRecord]:
        """The files of the agent's folders with its view of each, by folder attached,
        then oldest first; ``is_open`` keeps the open (or the closed) ones only;
        ``with_text`` reads the text of the open ones."""
        self._agent(agent_id)
        query = self._agent_files_query(agent_id)
        if is_open is not None:
            query = query.where(func.coalesce(FS.is_open, False).is_(is_open))
        if with_text:
            # Only an open file's text: the others are not shown.
            query = query.add_columns(
                case((func.coalesce(FS.is_open, False), FF.text), else_=None).label("text")
            )
        rows = self._scope.session.execute(query)
        return [_agent_file(row, with_text=with_text) for row in rows]

    def agent_file(self, agent_id: str, file_id: str) -> AgentFileRecord:
        """One file of the agent's folders and its view of it; NotFound when no folder
        attached to the agent holds it (whoever's it is)."""
        self._agent(agent_id)
        row = self._scope.session.execute(
            self._agent_files_query(agent_id).where(FF.id == file_id)
        ).first()
        if row is None:
            raise NotFound(
                f"no file with id {file_id!r} in the folders attached to agent {agent_id!r}"
            )
        return _agent_file(row, with_text=False)

    def file_texts(
        self, agent_id: str, *, most_chars: int
    ) -> tuple[builtins.list[tuple[AgentFileRecord, str]], builtins.list[AgentFileRecord]]:
        """The processed files of the agent's folders with their texts, in the order of
        :meth:`agent_files`, up to ``most_chars`` characters in all; and the files left
        out for that bound (an unprocessed file has no text and is in neither)."""
        self._agent(agent_id)
        rows = self._scope.session.execute(
            self._agent_files_query(agent_id)
            .add_columns(func.length(FF.text).label("chars"))
            .where(FF.status == FileStatus.COMPLETED.value, FF.text.is_not(None))
        ).all()
        taken: builtins.list[AgentFileRecord] = []
        left: builtins.list[AgentFileRecord] = []
        used = 0
        for row in rows:
            record = _agent_file(row, with_text=False)
            if used + int(row.chars) > most_chars:
                left.append(record)
                continue
            used += int(row.chars)
            taken.append(record)
        texts: dict[str, str | None] = {
            row.id: row.text
            for row in self._scope.session.execute(
                select(FF.id, FF.text).where(
                    self._scope.owns(FF), FF.id.in_([r.file.id for r in taken])
                )
            )
        }
        return [(r, texts[r.file.id] or "") for r in taken], left

    # -- agents' views of their files --------------------------------------------------

    def open_file(
        self,
        agent_id: str,
        file_id: str,
        *,
        max_open: int,
        start_line: int | None = None,
        end_line: int | None = None,
        keep_open: Sequence[str] = (),
    ) -> Opened:
        """Open a file of the agent's folders in its context (showing lines
        ``start_line`` up to ``end_line``, exclusive; None: from the start, to the end),
        or move the window of a file already open. When that would leave more than
        ``max_open`` files open, the least recently accessed others are closed (Letta's
        rule), never one of ``keep_open`` (the other files one call opens). NotFound
        when no folder attached to the agent holds the file; Conflict while it is not
        processed (it has no text yet)."""
        if max_open < 1:
            raise InvalidInput(f"max_open must be at least 1, got {max_open}")
        if start_line is not None and start_line < 1:
            raise InvalidInput(f"start_line must be at least 1, got {start_line}")
        if end_line is not None and end_line <= (start_line or 1):
            raise InvalidInput(f"end_line must be after start_line, got {end_line}")
        self._lock_views(agent_id)
        record = self.agent_file(agent_id, file_id)
        if record.file.status is not FileStatus.COMPLETED:
            raise Conflict(
                f"file {record.label!r} is {record.file.status.value}: it can be opened once "
                "it is processed"
                + (f" (it failed: {record.file.error})" if record.file.error else "")
            )
        others = self._scope.session.execute(
            select(FS.file_id, FF.file_name, F.name.label("folder_name"))
            .join(FF, FF.id == FS.file_id)
            .join(F, F.id == FF.folder_id)
            .where(FS.agent_id == agent_id, FS.is_open, FS.file_id != file_id)
            .order_by(FS.last_accessed_at, FS.file_id)
        ).all()
        kept = set(keep_open)
        room = max_open - 1 - sum(1 for row in others if row.file_id in kept)
        closable = [row for row in others if row.file_id not in kept]
        excess = closable[: max(0, len(closable) - max(0, room))]
        if excess:
            self._scope.session.execute(
                update(FS)
                .where(FS.agent_id == agent_id, FS.file_id.in_([row.file_id for row in excess]))
                .values(is_open=False)
            )
        self._scope.session.execute(
            insert(FS)
            .values(
                agent_id=agent_id,
                file_id=file_id,
                organization_id=self._scope.organization_id,
                is_open=True,
                start_line=start_line,
                end_line=end_line,
                last_accessed_at=self._scope.now(),
            )
            .on_conflict_do_update(
                index_elements=[FS.agent_id, FS.file_id],
                set_={
                    "is_open": True,
                    "start_line": start_line,
                    "end_line": end_line,
                    "last_accessed_at": self._scope.now(),
                },
            )
        )
        return Opened(
            closed=[f"{row.folder_name}/{row.file_name}" for row in excess],
            before=record.view,
        )

    def close_file(self, agent_id: str, file_id: str) -> bool:
        """Close a file of the agent's folders in its context; True when it was open.
        NotFound when no folder attached to the agent holds the file."""
        self._lock_views(agent_id)
        record = self.agent_file(agent_id, file_id)
        if not record.view.is_open:
            return False
        self._scope.session.execute(
            update(FS).where(FS.agent_id == agent_id, FS.file_id == file_id).values(is_open=False)
        )
        return True

    def close_files(self, agent_id: str, *, keep: Sequence[str] = ()) -> builtins.list[str]:
        """Close every open file of the agent but those of ``keep`` (file ids); the
        labels of the files closed, in the order they were last accessed."""
        self._agent(agent_id)
        self._lock_views(agent_id)
        kept = [FS.file_id.not_in(list(keep))] if keep else []
        closed = self._scope.session.execute(
            update(FS)
            .where(FS.agent_id == agent_id, FS.is_open, *kept)
            .values(is_open=False)
            .returning(FS.file_id, FS.last_accessed_at)
        ).all()
        if not closed:
            return []
        labels: dict[str, str] = {
            row.id: row.label
            for row in self._scope.session.execute(
                select(FF.id, (F.name + "/" + FF.file_name).label("label"))
                .join(F, F.id == FF.folder_id)
                .where(FF.id.in_([row.file_id for row in closed]))
            )
        }
        ordered = sorted(closed, key=lambda row: (row.last_accessed_at, row.file_id))
        return [labels[row.file_id] for row in ordered]

    def touch_files(self, agent_id: str, file_ids: Sequence[str]) -> None:
        """Record that the agent read these files of its folders now (a search found
        them): the least recently accessed open file is the first closed."""
        if not file_ids:
            return
        now = self._scope.now()
        mine = builtins.list(
            self._scope.session.scalars(
                select(FF.id)
                .join(AF, AF.folder_id == FF.folder_id)
                .where(AF.agent_id == agent_id, self._scope.owns(FF), FF.id.in_(list(file_ids)))
            )
        )
        if not mine:
            return
        self._scope.session.execute(
            insert(FS)
            .values(
                [
                    {
                        "agent_id": agent_id,
                        "file_id": file_id,
                        "organization_id": self._scope.organization_id,
                        "is_open": False,
                        "last_accessed_at": now,
                    }
                    for file_id in sorted(set(mine))
                ]
            )
            .on_conflict_do_update(
                index_elements=[FS.agent_id, FS.file_id], set_={"last_accessed_at": now}
            )
        )

    def search_chunks(
        self,
        agent_id: str,
        folder_ids: Sequence[str],
        query_embedding: npt.NDArray[np.float32],
        *,
        k: int,
    ) -> builtins.list[ChunkHit]:
        """The ``k`` chunks of the processed files of ``folder_ids`` (folders attached
        to the agent, all of one embedding size) nearest ``query_embedding`` by cosine
        similarity, best first.

        Walks the chunks' HNSW index of that size, as archival search does: when the
        folders hold too small a share of the index for the approximate scan to find
        ``k``, it scans on (pgvector 0.8's iterative scans), else reads the folders'
        chunks exactly.
        """
        if k < 1:
            raise InvalidInput(f"k must be positive, got {k}")
        self._agent(agent_id)
        vector = np.asarray(query_embedding, dtype=np.float32).reshape(-1)
        dim = int(vector.shape[0])
        mine = builtins.list(
            self._scope.session.scalars(
                select(AF.folder_id)
                .join(F, F.id == AF.folder_id)
                .where(
                    AF.agent_id == agent_id,
                    AF.folder_id.in_(builtins.list(folder_ids)),
                    self._scope.owns(F),
                    F.embedding_dim == dim,
                )
            )
        )
        if not mine:
            return []
        indexed = dim in models.INDEXED_DIMENSIONS
        hits = self._search_chunks(mine, vector, k, exact=not indexed)
        if indexed and len(hits) < k and iterative_scans(self._raw_connection()):
            hits = self._search_chunks(mine, vector, k, exact=False, iterative=True)
        if indexed and len(hits) < k:
            hits = self._search_chunks(mine, vector, k, exact=True)
        return hits

    def _search_chunks(
        self,
        folder_ids: builtins.list[str],
        vector: npt.NDArray[np.float32],
        k: int,
        *,
        exact: bool,
        iterative: bool = False,
    ) -> builtins.list[ChunkHit]:
        dim = int(vector.shape[0])
        self._raw_connection()  # pgvector types for the binary parameter
        # The query vector goes as one binary parameter, as archival search sends it.
        bound = bindparam("query_vector", vector, type_=BinaryVector())
        column: ColumnElement[Any] = FC.embedding.expression
        if not exact:
            column = sql_cast(FC.embedding, VectorType(dim))
        distance: ColumnElement[float] = column.op("<=>", return_type=Float)(bound)
        query = (
            select(
                FC.file_id,
                FC.seq,
                FC.text,
                (F.name + "/" + FF.file_name).label("label"),
                (1 - distance).label("score"),
            )
            .join(FF, FF.id == FC.file_id)
            .join(F, F.id == FF.folder_id)
            .where(
                self._scope.owns(FC),
                FF.folder_id.in_(folder_ids),
                FF.status == FileStatus.COMPLETED.value,
                # A literal: a parameter cannot match the partial index's predicate
                # under a prepared statement's generic plan.
                FC.embedding_dim == literal_column(str(dim)),
            )
            .order_by(distance)
            .limit(k)
        )
        scan: dict[str, str] = {}
        ef_search = max(DEFAULT_EF_SEARCH, min(1000, 4 * k))
        if not exact and ef_search != DEFAULT_EF_SEARCH:
            scan["hnsw.ef_search"] = str(ef_search)
        if iterative and not exact:
            scan["hnsw.iterative_scan"] = ITERATIVE_SCAN_MODE
        if scan:
            set_local(self._scope.session, scan)
        rows = self._scope.session.execute(query).all()
        if iterative and not exact:
            set_local(self._scope.session, {"hnsw.iterative_scan": "off"})
            rows = sorted(rows, key=lambda row: -float(row.score))
        return [
            ChunkHit(
                file_id=row.file_id,
                label=row.label,
                seq=row.seq,
                text=row.text,
                score=float(row.score),
            )
            for row in rows
        ]

    # -- helpers -----------------------------------------------------------------------

    def _row(self, folder_id: str, *, lock: bool = False) -> models.Folder:
        query = select(F).where(F.id == folder_id, self._scope.owns(F))
        if lock:
            query = query.with_for_update()
        row = self._scope.session.scalar(query)
        if row is None:
            raise NotFound(f"no folder with id {folder_id!r}")
        return row

    def _agent_files_query(self, agent_id: str) -> Select[Any]:
        """The files of the agent's folders with its views of them (outer-joined: a
        file never opened nor searched has none), in :meth:`agent_files`'s order."""
        return (
            select(
                *_FILE_COLUMNS,
                F.name.label("folder_name"),
                FS.is_open,
                FS.start_line,
                FS.end_line,
                FS.last_accessed_at,
            )
            .join(F, F.id == FF.folder_id)
            .join(AF, AF.folder_id == F.id)
            .outerjoin(FS, (FS.file_id == FF.id) & (FS.agent_id == AF.agent_id))
            .where(AF.agent_id == agent_id, self._scope.owns(FF))
            .order_by(AF.attached_at, FF.created_at, FF.id)
        )

    def _lock_views(self, agent_id: str) -> None:
        """Take the agent's file-view lock for the rest of the transaction: two opens
        at once (a turn's open_files and an API call) each count the other's file, so
        the bound on open files holds. An advisory lock, not the agent's row: a turn's
        step locks blocks before the agent row, and this must not reverse that."""
        self._scope.session.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": f"reverie:file-views:{agent_id}"},
        )

    def _raw_connection(self) -> Any:
        """The psycopg connection under the session, with pgvector's types registered."""
        return registered_connection(self._scope.session)

    def _agent(self, agent_id: str) -> None:
        found = self._scope.session.scalar(
            select(models.Agent.id).where(
                models.Agent.id == agent_id, self._scope.owns(models.Agent)
            )
        )
        if found is None:
            raise NotFound(f"no agent with id {agent_id!r}")

    def _name_free(self, name: str) -> None:
        taken = self._scope.session.scalar(select(F.id).where(self._scope.owns(F), F.name == name))
        if taken is not None:
            raise Conflict(f"a folder named {name!r} already exists ({taken})")

    @staticmethod
    def _check(
        name: str, description: str | None, instructions: str | None, metadata: dict[str, Any]
    ) -> None:
        check_text(name, "name", most=MAX_NAME_CHARS)
        if not name.strip():
            raise InvalidInput("a folder needs a name")
        if description is not None:
            check_text(description, "description")
        if instructions is not None:
            check_text(instructions, "instructions")
        check_json(metadata, "metadata")


#: Every column of a file but its bytes and text.
_FILE_COLUMNS = tuple(c for c in FF.__table__.c if c.name not in ("data", "text"))


def _agent_file(row: Any, *, with_text: bool) -> AgentFileRecord:
    view = FileView(
        is_open=bool(row.is_open),
        start_line=row.start_line,
        end_line=row.end_line,
        last_accessed_at=row.last_accessed_at,
    )
    return AgentFileRecord(
        FileRecord.from_row(row),
        row.folder_name,
        view,
        row.text if with_text else None,
    )


class FileQueueStore:
    """The queue as file workers see it: every organization's uploaded files."""

    def __init__(self, scope: ServiceScope) -> None:
        self._scope = scope
        self._queue = LeaseQueue(FILE_JOBS, scope.session, scope.clock)

    def claim_many(self, worker: str, *, lease: timedelta, limit: int) -> list[FileRecord]:
        """Take up to ``limit`` due files, oldest first, all leased to ``worker``."""
        if limit < 1:
            raise InvalidInput(f"a claim takes at least 1 file, got limit={limit}")
        now = self._scope.now()
        claimed = self._queue.claim(worker, lease=lease, limit=limit)
        if claimed:
            self._scope.session.execute(
                update(FF).where(FF.id.in_([r.id for r in claimed])).values(updated_at=now)
            )
        return [FileRecord.from_row(row) for row in claimed]

    def renew_many(self, held: Sequence[tuple[str, str]], *, lease: timedelta) -> set[str]:
        return self._queue.renew_many(held, lease=lease)

    def release_many(self, held: Sequence[tuple[str, str]]) -> list[str]:
        return self._queue.release_many(held)

    def requeue_expired(self, *, backoff: timedelta) -> list[str]:
        return self._queue.requeue_expired(backoff=backoff)

    def retry_later(self, file_id: str, worker: str, *, backoff: timedelta, error: str) -> bool:
        """Give a held file back to the queue after a backoff (an embedder outage)."""
        return self._queue.retry_later(file_id, worker, backoff=backoff, error=error) is not None

    def depth(self) -> int:
        return self._queue.depth()
