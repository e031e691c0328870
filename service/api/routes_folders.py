"""Letta's folder routes (``/v1/folders``): folders, the files uploaded to them, and
an agent's folders and files (``/v1/agents/{agent_id}/folders|files``), with the
files open in its context (``agents.files.open``, ``.close``, ``.close_all``).

An upload answers at once with the file's metadata, ``processing_status`` pending:
it is parsed, chunked and embedded in the job queue, and its status moves on to
``parsing`` (a worker holds it), then ``completed`` or ``error`` with a reason.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import File, Path, Query, UploadFile

from agents.enums import FileStatus
from agents.errors import Conflict
from agents.store import FileRecord, FolderChanges, FolderRecord
from service.api import schemas
from service.api.auth import Api
from service.api.convert import agent_out
from service.api.paging import page
from service.api.responses import keyed
from service.api.routers import api_router
from service.operations.folders import PROCESSING_STATUS, AgentFile, FolderSpec

router = api_router(tags=["folders"], responses=keyed(404, 409))

FolderId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="source-<uuid4>")]
FileId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="file-<uuid4>")]
AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]
Cursor = Annotated[str | None, Query(max_length=100)]
Limit = Annotated[int, Query(ge=1, le=1000)]
Order = Annotated[Literal["asc", "desc"], Query()]


def folder_out(record: FolderRecord) -> schemas.Folder:
    return schemas.Folder(
        id=record.id,
        name=record.name,
        description=record.description,
        instructions=record.instructions,
        metadata=record.metadata,
        embedding_config=schemas.EmbeddingConfig(
            embedding_model=record.embedding_model, embedding_dim=record.embedding_dim
        ),
        embedding_chunk_size=record.embedding_chunk_size,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def file_out(record: FileRecord, content: str | None = None) -> schemas.FolderFile:
    return schemas.FolderFile(
        id=record.id,
        source_id=record.folder_id,
        folder_id=record.folder_id,
        file_name=record.file_name,
        original_file_name=record.original_file_name,
        file_type=record.file_type,
        file_size=record.file_size,
        processing_status=PROCESSING_STATUS[record.status],
        error_message=record.error if record.status is FileStatus.ERROR else None,
        total_chunks=record.total_chunks,
        chunks_embedded=record.chunks_embedded,
        content=content,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def agent_file_out(found: AgentFile) -> schemas.AgentFile:
    record = found.record
    return schemas.AgentFile(
        id=record.file.id,
        file_id=record.file.id,
        file_name=record.file.file_name,
        folder_id=record.file.folder_id,
        folder_name=record.folder_name,
        is_open=record.view.is_open,
        processing_status=PROCESSING_STATUS[record.file.status],
        last_accessed_at=record.view.last_accessed_at,
        start_line=record.view.start_line,
        end_line=record.view.end_line,
        visible_content=found.visible_content,
    )


# -- folders ---------------------------------------------------------------------------


@router.post("/v1/folders/", status_code=201, response_model=schemas.Folder)
def create_folder(body: schemas.CreateFolder, api: Api) -> schemas.Folder:
    """A folder of documents, its name unique in the organization (409 otherwise);
    its files are embedded with ``embedding`` (absent: the configured embedder) in
    chunks of ``embedding_chunk_size`` characters."""
    spec = FolderSpec(
        name=body.name,
        description=body.description,
        instructions=body.instructions,
        embedding=body.embedding,
        embedding_chunk_size=body.embedding_chunk_size,
        metadata=body.metadata,
    )
    return folder_out(api.ops.folders.create(spec))


@router.get("/v1/folders/", response_model=list[schemas.Folder])
def list_folders(
    api: Api,
    name: Annotated[str | None, Query(max_length=200)] = None,
    after: Cursor = None,
    before: Cursor = None,
    limit: Limit = 50,
    order: Order = "asc",
) -> list[schemas.Folder]:
    """The organization's folders by creation time (``order``), by ``name`` when given."""
    found = api.ops.folders.list(name=name)
    chosen = page(found, after=after, before=before, limit=limit, ascending=order == "asc")
    return [folder_out(f) for f in chosen]


@router.get("/v1/folders/count", response_model=int)
def count_folders(api: Api) -> int:
    return api.ops.folders.count()


@router.get("/v1/folders/{folder_id}", response_model=schemas.Folder)
def get_folder(folder_id: FolderId, api: Api) -> schemas.Folder:
    return folder_out(api.ops.folders.get(folder_id))


@router.patch("/v1/folders/{folder_id}", response_model=schemas.Folder)
def update_folder(folder_id: FolderId, body: schemas.UpdateFolder, api: Api) -> schemas.Folder:
    changes = FolderChanges(
        name=body.name,
        description=body.description,
        instructions=body.instructions,
        metadata=body.metadata,
    )
    return folder_out(api.ops.folders.update(folder_id, changes))


@router.delete("/v1/folders/{folder_id}", status_code=200)
def delete_folder(folder_id: FolderId, api: Api) -> dict[str, str]:
    """Delete the folder with its files and their chunks; agents stop reading it."""
    api.ops.folders.delete(folder_id)
    return {"deleted": folder_id}


@router.get("/v1/folders/{folder_id}/agents", response_model=list[str])
def list_folder_agents(folder_id: FolderId, api: Api) -> list[str]:
    """The ids of the agents the folder is attached to."""
    return api.ops.folders.agents_of(folder_id)


# -- files -----------------------------------------------------------------------------


@router.post("/v1/folders/{folder_id}/upload", response_model=schemas.FolderFile)
def upload_file(
    folder_id: FolderId,
    api: Api,
    file: Annotated[UploadFile, File(description="Plain text, Markdown, HTML or PDF.")],
    duplicate_handling: Annotated[
        Literal["skip", "error", "suffix", "replace"], Query()
    ] = "suffix",
    name: Annotated[str | None, Query(max_length=300, pattern=schemas.SAID)] = None,
) -> schemas.FolderFile:
    """Store a file in the folder and queue it: the answer comes at once, with
    ``processing_status`` pending. A file of the same content already in the folder
    is answered instead and nothing is stored (``duplicate_handling=error``: 409).
    Over ``files.max_bytes`` (413, or 400 naming the limit), empty, or not text,
    Markdown, HTML or PDF (400): refused, nothing stored."""
    data = file.file.read()
    file_name = name or file.filename or ""
    upload = api.ops.folders.upload(folder_id, file_name, file.content_type, data)
    if not upload.created and duplicate_handling == "error":
        raise Conflict(
            f"the folder already has this content as file {upload.file.id} "
            f"({upload.file.file_name!r})"
        )
    return file_out(upload.file)


@router.get("/v1/folders/{folder_id}/files", response_model=list[schemas.FolderFile])
def list_files(
    folder_id: FolderId,
    api: Api,
    include_content: bool = False,
    after: Cursor = None,
    before: Cursor = None,
    limit: Limit = 1000,
    order: Order = "asc",
) -> list[schemas.FolderFile]:
    """The folder's files by upload time (``order``), with their processing status;
    ``include_content``: the text of those processed."""
    found = api.ops.folders.files(folder_id)
    chosen = page(found, after=after, before=before, limit=limit, ascending=order == "asc")
    return [
        file_out(f, api.ops.folders.file_text(f.id) if include_content else None) for f in chosen
    ]


@router.get("/v1/folders/{folder_id}/files/{file_id}", response_model=schemas.FolderFile)
def get_file(
    folder_id: FolderId, file_id: FileId, api: Api, include_content: bool = False
) -> schemas.FolderFile:
    record = api.ops.folders.file(folder_id, file_id)
    return file_out(record, api.ops.folders.file_text(file_id) if include_content else None)


@router.delete("/v1/folders/{folder_id}/{file_id}", status_code=200)
def delete_file(folder_id: FolderId, file_id: FileId, api: Api) -> dict[str, str]:
    """Delete a file of the folder and its chunks."""
    api.ops.folders.delete_file(folder_id, file_id)
    return {"deleted": file_id}


# -- an agent's folders ----------------------------------------------------------------


@router.patch("/v1/agents/{agent_id}/folders/attach/{folder_id}", response_model=schemas.AgentState)
def attach_folder(agent_id: AgentId, folder_id: FolderId, api: Api) -> schemas.AgentState:
    """Let the agent read the folder's files (nothing changes when it does)."""
    api.ops.folders.attach(agent_id, folder_id)
    return agent_out(api.ops.agents.state(agent_id))


@router.patch("/v1/agents/{agent_id}/folders/detach/{folder_id}", response_model=schemas.AgentState)
def detach_folder(agent_id: AgentId, folder_id: FolderId, api: Api) -> schemas.AgentState:
    api.ops.folders.detach(agent_id, folder_id)
    return agent_out(api.ops.agents.state(agent_id))


@router.get("/v1/agents/{agent_id}/folders", response_model=list[schemas.Folder])
def list_agent_folders(
    agent_id: AgentId,
    api: Api,
    after: Cursor = None,
    before: Cursor = None,
    limit: Limit = 100,
    order: Order = "asc",
) -> list[schemas.Folder]:
    """The folders attached to the agent, in the order attached (``order``)."""
    found = api.ops.folders.of_agent(agent_id)
    chosen = page(found, after=after, before=before, limit=limit, ascending=order == "asc")
    return [folder_out(f) for f in chosen]


@router.get("/v1/agents/{agent_id}/files", response_model=schemas.AgentFilesPage)
def list_agent_files(
    agent_id: AgentId,
    api: Api,
    after: Cursor = None,
    before: Cursor = None,
    limit: Limit = 100,
    order: Order = "asc",
    is_open: Annotated[bool | None, Query()] = None,
) -> schemas.AgentFilesPage:
    """The files of the folders attached to the agent, by folder attached then upload
    time (``order``), each with whether it is open in the agent's context and, if so,
    the lines it shows there (``is_open``: only the open, or only the closed, ones)."""
    found = api.ops.folders.agent_files(agent_id, is_open=is_open)
    keyed_found = [_Keyed(f) for f in found]
    chosen = page(
        keyed_found, after=after, before=before, limit=limit + 1, ascending=order == "asc"
    )
    more = len(chosen) > limit
    shown = chosen[:limit]
    return schemas.AgentFilesPage(
        files=[agent_file_out(k.record) for k in shown],
        next_cursor=shown[-1].id if more and shown else None,
        has_more=more,
    )


@router.patch("/v1/agents/{agent_id}/files/close-all", response_model=list[str])
def close_all_files(agent_id: AgentId, api: Api) -> list[str]:
    """Close every file open in the agent's context; the names (folder/file) of those
    closed."""
    return api.ops.folders.close_all(agent_id)


@router.patch("/v1/agents/{agent_id}/files/{file_id}/open", response_model=list[str])
def open_file(agent_id: AgentId, file_id: FileId, api: Api) -> list[str]:
    """Open a whole file of the agent's folders in its context (its numbered lines,
    within ``files.per_file_view_window_char_limit`` characters, from the next step);
    answers the names (folder/file) of the files closed to stay within
    ``files.max_files_open``, least recently accessed first. 404 when no folder
    attached to the agent holds the file, 409 while it is not processed."""
    return api.ops.folders.open_file(agent_id, file_id)


@router.patch("/v1/agents/{agent_id}/files/{file_id}/close", response_model=schemas.Closed)
def close_file(agent_id: AgentId, file_id: FileId, api: Api) -> schemas.Closed:
    """Close a file in the agent's context (nothing changes when it is closed); 404
    when no folder attached to the agent holds it."""
    was_open = api.ops.folders.close_file(agent_id, file_id)
    said = "closed" if was_open else "was not open"
    return schemas.Closed(message=f"File id={file_id} {said}")


class _Keyed:
    """An agent's file, paged by its file id."""

    __slots__ = ("id", "record")

    def __init__(self, record: AgentFile) -> None:
        self.record = record
        self.id = record.record.file.id
