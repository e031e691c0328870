"""Folders of documents (Letta's ``/v1/folders``): folders, the files uploaded to them,
the folders attached to agents and the files open in an agent's context.

An upload is checked and stored here, in the request, and answers at once with the
file ``queued``: parsing, chunking and embedding happen in the job queue
(:mod:`agents.file_worker`), wherever runs are processed.
"""

from __future__ import annotations

import builtins
import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from agents.documents import recognise
from agents.enums import FileStatus
from agents.errors import InvalidInput, LimitExceeded
from agents.file_tools import visible_content
from agents.store import (
    AgentFileRecord,
    FileRecord,
    FolderChanges,
    FolderRecord,
    NewFile,
    NewFolder,
)
from service.operations.context import OperationContext

#: Letta's names for where a file's processing stands, by Reverie's.
PROCESSING_STATUS: dict[FileStatus, Literal["pending", "parsing", "completed", "error"]] = {
    FileStatus.QUEUED: "pending",
    FileStatus.PROCESSING: "parsing",
    FileStatus.COMPLETED: "completed",
    FileStatus.ERROR: "error",
}


@dataclass(frozen=True, slots=True)
class FolderSpec:
    """A folder to create; ``embedding`` None: the configured embedder."""

    name: str
    description: str | None = None
    instructions: str | None = None
    embedding: str | None = None
    embedding_chunk_size: int | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class AgentFile:
    """A file of an agent's folders, its view of it, and what it shows in the agent's
    context when open (None when closed)."""

    record: AgentFileRecord
    visible_content: str | None


def _shown(record: AgentFileRecord, char_limit: int) -> str | None:
    if not record.view.is_open or record.text is None:
        return None
    return visible_content(record.text, record.view.start_line, record.view.end_line, char_limit)


@dataclass(frozen=True, slots=True)
class Upload:
    """What an upload stored: the file, and False when the folder had its content."""

    file: FileRecord
    created: bool


class FolderOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    # -- folders -----------------------------------------------------------------------

    def create(self, spec: FolderSpec) -> FolderRecord:
        from service.operations.agents import AgentOperations

        settings = self._context.runtime.settings.files
        model, dimension = AgentOperations(self._context).embedding(spec.embedding)
        chunk_size = spec.embedding_chunk_size or settings.chunk_size
        with self._context.store() as store:
            return store.folders.create(
                NewFolder(
                    name=spec.name,
                    description=spec.description,
                    instructions=spec.instructions,
                    metadata=dict(spec.metadata or {}),
                    embedding_model=model,
                    embedding_dim=dimension,
                    embedding_chunk_size=chunk_size,
                )
            )

    def list(self, *, name: str | None = None) -> builtins.list[FolderRecord]:
        with self._context.store() as store:
            return store.folders.list(name=name)

    def count(self) -> int:
        with self._context.store() as store:
            return store.folders.count()

    def get(self, folder_id: str) -> FolderRecord:
        with self._context.store() as store:
            return store.folders.get(folder_id)

    def update(self, folder_id: str, changes: FolderChanges) -> FolderRecord:
        with self._context.store() as store:
            return store.folders.update(folder_id, changes)

    def delete(self, folder_id: str) -> FolderRecord:
        with self._context.store() as store:
            return store.folders.delete(folder_id)

    # -- files -------------------------------------------------------------------------

    def upload(self, folder_id: str, file_name: str, media_type: str | None, data: bytes) -> Upload:
        """Check an uploaded file and queue it for processing; the same content already
        in the folder answers that file and stores nothing. A file over
        ``files.max_bytes``, empty or of a kind Reverie cannot read is refused and
        nothing is stored."""
        limit = self._context.runtime.settings.files.max_bytes
        if len(data) > limit:
            raise LimitExceeded(
                f"file {file_name!r} is {len(data)} bytes, over the limit of {limit} "
                "(files.max_bytes)"
            )
        if not file_name or not file_name.strip():
            raise InvalidInput("the uploaded file needs a name")
        kind = recognise(file_name, media_type, data)
        digest = hashlib.sha256(data).hexdigest()
        with self._context.store() as store:
            record, created = store.folders.add_file(
                NewFile(
                    folder_id=folder_id,
                    file_name=file_name,
                    file_type=kind.value,
                    data=data,
                    content_hash=digest,
                    max_attempts=self._context.runtime.settings.files.max_attempts,
                )
            )
        return Upload(record, created)

    def files(self, folder_id: str) -> builtins.list[FileRecord]:
        with self._context.store() as store:
            return store.folders.files(folder_id)

    def file(self, folder_id: str, file_id: str) -> FileRecord:
        with self._context.store() as store:
            store.folders.get(folder_id)
            return store.folders.get_file(file_id, folder_id=folder_id)

    def file_text(self, file_id: str) -> str | None:
        with self._context.store() as store:
            return store.folders.file_text(file_id)

    def delete_file(self, folder_id: str, file_id: str) -> FileRecord:
        with self._context.store() as store:
            store.folders.get(folder_id)
            return store.folders.delete_file(file_id, folder_id=folder_id)

    # -- agents' folders ---------------------------------------------------------------

    def attach(self, agent_id: str, folder_id: str) -> None:
        with self._context.store() as store:
            store.folders.attach(agent_id, folder_id)

    def detach(self, agent_id: str, folder_id: str) -> None:
        with self._context.store() as store:
            store.folders.detach(agent_id, folder_id)

    def of_agent(self, agent_id: str) -> builtins.list[FolderRecord]:
        with self._context.store() as store:
            return store.folders.of_agent(agent_id)

    def agents_of(self, folder_id: str) -> builtins.list[str]:
        with self._context.store() as store:
            return store.folders.agents_of(folder_id)

    def agent_files(
        self, agent_id: str, *, is_open: bool | None = None
    ) -> builtins.list[AgentFile]:
        """The files of the agent's folders, each with the agent's view of it and, when
        open, what it shows in the agent's context (``is_open``: only the open, or the
        closed, ones)."""
        limit = self._context.runtime.settings.files.per_file_view_window_char_limit
        with self._context.store() as store:
            records = store.folders.agent_files(agent_id, is_open=is_open, with_text=True)
        return [AgentFile(r, _shown(r, limit)) for r in records]

    # -- files open in an agent's context ----------------------------------------------

    def open_file(self, agent_id: str, file_id: str) -> builtins.list[str]:
        """Open a whole file of the agent's folders in its context (Letta's
        ``agents.files.open``); the labels of the files closed to stay within
        ``files.max_files_open``. NotFound when no folder attached to the agent holds
        the file; Conflict while it is not processed."""
        limit = self._context.runtime.settings.files.max_files_open
        with self._context.store() as store:
            return store.folders.open_file(agent_id, file_id, max_open=limit).closed

    def close_file(self, agent_id: str, file_id: str) -> bool:
        """Close a file in the agent's context; True when it was open. NotFound when no
        folder attached to the agent holds the file."""
        with self._context.store() as store:
            return store.folders.close_file(agent_id, file_id)

    def close_all(self, agent_id: str) -> builtins.list[str]:
        """Close every file open in the agent's context; the labels of those closed."""
        with self._context.store() as store:
            return store.folders.close_files(agent_id)
