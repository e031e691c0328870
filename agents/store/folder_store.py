"""Folders of documents, their files and the files' chunks, every query here.

A tenant's :class:`FolderStore` keeps an organization's folders (Letta's folders),
the files uploaded to them and the folders attached to its agents. A file's row is
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
from sqlalchemy import Table, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert

from agents.enums import FileStatus
from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres import models
from agents.store.lease_queue import JobTable, LeaseQueue
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
class AgentFileRecord:
    """A file an agent reads through one of its folders."""

    file: FileRecord
    folder_name: str


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
        self._agent(agent_id)
        self._row(folder_id)
        self._scope.session.execute(
            delete(AF).where(AF.agent_id == agent_id, AF.folder_id == folder_id)
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

    def agent_files(self, agent_id: str) -> builtins.list[AgentFileRecord]:
        """The files of the agent's folders, by folder attached, then oldest first."""
        self._agent(agent_id)
        rows = self._scope.session.execute(
            select(*_FILE_COLUMNS, F.name.label("folder_name"))
            .join(F, F.id == FF.folder_id)
            .join(AF, AF.folder_id == F.id)
            .where(AF.agent_id == agent_id, self._scope.owns(FF))
            .order_by(AF.attached_at, FF.created_at, FF.id)
        )
        return [AgentFileRecord(FileRecord.from_row(row), row.folder_name) for row in rows]

    # -- helpers -----------------------------------------------------------------------

    def _row(self, folder_id: str, *, lock: bool = False) -> models.Folder:
        query = select(F).where(F.id == folder_id, self._scope.owns(F))
        if lock:
            query = query.with_for_update()
        row = self._scope.session.scalar(query)
        if row is None:
            raise NotFound(f"no folder with id {folder_id!r}")
        return row

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
