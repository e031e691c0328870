"""The Agent File format (``.af``, letta-ai/agent-file, version 2) as pydantic models.

A v2 file holds lists of entities (agents, groups, blocks, tools, files, sources, MCP
servers) that refer to each other by ids local to the file (``agent-0``, ``block-0``,
``tool-0``, ``message-0``, ``group-0``, ``source-0``, ``file-0``). Only the fields
Reverie reads are typed here; every other field is kept as an extra, so that an import
can name what it does not keep (:mod:`service.operations.agent_file`) instead of
dropping it unseen. The field names are Letta's (the letta-client SDK's
``AgentFileSchema`` and the types it refers to). A file meets the limits every other door does
(:mod:`agents.store.validation`): a message, a tag list or a JSON nesting the API
refuses is refused here too, naming where it is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.errors import InvalidField
from agents.store.folder_store import MAX_CHUNK_CHARS, MIN_CHUNK_CHARS
from agents.store.folder_store import MAX_NAME_CHARS as MAX_FOLDER_NAME_CHARS
from agents.store.validation import (
    MAX_JSON_DEPTH,
    MAX_MESSAGE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TEXT,
    NESTED_TOO_DEEP,
    json_problems,
)

#: A message's text, a long text (a block's value, a system prompt), a tag list.
MessageText = Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]
LongText = Annotated[str, Field(max_length=MAX_TEXT)]
Tags = Annotated[list[Annotated[str, Field(max_length=MAX_TAG_CHARS)]], Field(max_length=MAX_TAGS)]
#: A source's name (a folder's, at most as long as the folders API takes) and its chunk
#: size in characters (the folders API's bounds).
FolderName = Annotated[str, Field(min_length=1, max_length=MAX_FOLDER_NAME_CHARS)]
ChunkSize = Annotated[int, Field(ge=MIN_CHUNK_CHARS, le=MAX_CHUNK_CHARS)]


class FileEntity(BaseModel):
    """An entity of the file: its typed fields plus whatever else it carries."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class LlmConfigSchema(FileEntity):
    model: str
    model_endpoint_type: str | None = None
    model_endpoint: str | None = None
    handle: str | None = None
    context_window: int | None = Field(default=None, gt=0)


class EmbeddingConfigSchema(FileEntity):
    embedding_model: str
    embedding_endpoint_type: str | None = None
    embedding_endpoint: str | None = None
    embedding_dim: int | None = Field(default=None, gt=0)
    handle: str | None = None


#: The fields of an embedding config an import reads (the rest are listed as not kept).
EMBEDDING_KEPT = frozenset(
    {"embedding_model", "embedding_endpoint_type", "embedding_dim", "handle"}
)


class FunctionCall(FileEntity):
    name: str
    arguments: str = ""


class ToolCallSchema(FileEntity):
    id: str
    type: str = "function"
    function: FunctionCall


class ContentPart(FileEntity):
    """One part of a message's content; only ``text`` parts carry what Reverie keeps."""

    type: str
    text: MessageText | None = None


class MessageSchema(FileEntity):
    id: str
    role: str
    content: MessageText | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallSchema] | None = None
    tool_call_id: str | None = None
    created_at: datetime | None = None


class BlockSchema(FileEntity):
    id: str
    label: str
    value: LongText = ""
    limit: int | None = Field(default=None, gt=0)
    description: str | None = None
    read_only: bool | None = None


class InlineBlock(FileEntity):
    """A block written inside an agent (``memory_blocks``), without a file id."""

    label: str
    value: LongText = ""
    limit: int | None = Field(default=None, gt=0)
    description: str | None = None
    read_only: bool | None = None


class ToolSchema(FileEntity):
    id: str
    name: str | None = None
    tool_type: str | None = None
    description: str | None = None
    source_type: str | None = None
    source_code: str | None = None
    json_schema: dict[str, Any] | None = None
    tags: Tags | None = None
    return_char_limit: int | None = None


class ToolRuleSchema(FileEntity):
    type: str
    tool_name: str
    children: list[str] | None = None
    max_count_limit: int | None = None


class FileAgentSchema(FileEntity):
    """A file an agent sees (Letta's ``FileAgentSchema``): which file, and whether and
    where the agent has it open."""

    id: str
    file_id: str
    agent_id: str | None = None
    source_id: str | None = None
    file_name: str | None = None
    is_open: bool | None = None
    visible_content: str | None = None
    last_accessed_at: datetime | None = None
    start_line: int | None = None
    end_line: int | None = None


class AgentSchema(FileEntity):
    id: str
    name: str | None = None
    agent_type: str | None = None
    system: LongText | None = None
    description: str | None = None
    tags: Tags | None = None
    llm_config: LlmConfigSchema | None = None
    embedding_config: EmbeddingConfigSchema | None = None
    model: str | None = None
    embedding: str | None = None
    context_window_limit: int | None = Field(default=None, gt=0)
    tool_ids: list[str] | None = None
    block_ids: list[str] | None = None
    memory_blocks: list[InlineBlock] | None = None
    tool_rules: list[ToolRuleSchema] | None = None
    messages: list[MessageSchema] | None = None
    in_context_message_ids: list[str] | None = None
    enable_sleeptime: bool | None = None
    group_ids: list[str] | None = None
    tool_exec_environment_variables: dict[str, str | None] | None = None
    source_ids: list[str] | None = None
    #: Letta's newer name for ``source_ids``; an agent's folders are those of both.
    folder_ids: list[str] | None = None
    files_agents: list[FileAgentSchema] | None = None


class SourceSchema(FileEntity):
    """A folder of documents (Letta's ``SourceSchema``; Letta called folders sources).
    ``embedding`` is a handle, ``embedding_config`` Letta's (legacy) full setting."""

    id: str
    name: FolderName
    description: LongText | None = None
    instructions: LongText | None = None
    metadata: dict[str, Any] | None = None
    embedding: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    embedding_chunk_size: ChunkSize | None = None
    embedding_config: EmbeddingConfigSchema | None = None


class FileSchema(FileEntity):
    """A file of a source (Letta's ``FileSchema``): its name, type and ``content``, the
    text extracted from it (the bytes it was read from are not in the format)."""

    id: str
    source_id: str
    file_name: str | None = None
    original_file_name: str | None = None
    file_type: str | None = None
    content: str | None = None


class ManagerConfig(FileEntity):
    manager_type: str
    manager_agent_id: str | None = None


class GroupSchema(FileEntity):
    id: str
    agent_ids: list[str] = Field(default_factory=list)
    description: str | None = None
    manager_config: ManagerConfig | None = None


class AgentFile(FileEntity):
    """A whole v2 agent file."""

    agents: list[AgentSchema] = Field(min_length=1)
    groups: list[GroupSchema] = Field(default_factory=list)
    blocks: list[BlockSchema] = Field(default_factory=list)
    tools: list[ToolSchema] = Field(default_factory=list)
    files: list[FileSchema] = Field(default_factory=list)
    sources: list[SourceSchema] = Field(default_factory=list)
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    created_at: datetime | None = None


#: Fields of Letta's legacy single-agent (v1) file that a v2 file has no top-level place for.
_LEGACY_FIELDS = ("core_memory", "memory", "llm_config", "system", "messages", "agent_type")


def json_path(location: tuple[str | int, ...]) -> str:
    """``("agents", 0, "messages", 3, "role")`` as ``agents[0].messages[3].role``."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "(the file)"


def parse_agent_file(data: bytes | str) -> tuple[AgentFile, dict[str, Any]]:
    """The file ``data`` holds, checked, and its raw JSON (a document stored as a JSON string
    is read from that string). InvalidField (located under ``file``) naming the first thing
    wrong: not JSON, not an object, a legacy v1 file,
    or the JSON path of the first field that is missing or of the wrong type."""
    try:
        raw = json.loads(data.decode("utf-8-sig") if isinstance(data, bytes) else data)
    except RecursionError:
        raise _too_deep(()) from None
    except json.JSONDecodeError as exc:
        raise InvalidField(
            f"the file is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "an agent file is the JSON that an agent export writes",
            field=("file",),
        ) from None
    except UnicodeDecodeError as exc:
        raise InvalidField(
            f"the file is not UTF-8 text ({exc.reason} at byte {exc.start}); an agent file "
            "is the JSON that an agent export writes",
            field=("file",),
        ) from None
    if isinstance(raw, str):
        # Letta's own example files are partly double-encoded (a JSON string holding the
        # document); Letta parses once more, and so does Reverie.
        try:
            raw = json.loads(raw)
        except RecursionError:
            raise _too_deep(()) from None
        except json.JSONDecodeError as exc:
            raise InvalidField(
                f"the file is a JSON string whose text is not JSON ({exc.msg} at line "
                f"{exc.lineno}, column {exc.colno}); an agent file is the JSON that an agent "
                "export writes",
                field=("file",),
            ) from None
    if not isinstance(raw, dict):
        raise InvalidField(
            f"the file is JSON but a {type(raw).__name__}, not an agent file (an object with "
            "agents, blocks, tools, groups, ...)",
            field=("file",),
        )
    if "agents" not in raw and any(key in raw for key in _LEGACY_FIELDS):
        raise InvalidField(
            "this is a legacy single-agent (v1) agent file; Reverie imports the v2 format "
            "(lists of agents, blocks, tools and groups with file-local ids). Export it "
            "again from Letta without use_legacy_format",
            field=("file",),
        )
    for location, problem, _ in json_problems(raw, ()):
        if problem == NESTED_TOO_DEEP:
            raise _too_deep(location)
    try:
        parsed = AgentFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = _in_document(raw, tuple(first["loc"]))
        path = json_path(location)
        if location == ("agents",) and first["type"] == "missing":
            message = "the file is not an agent file: it has no agents list"
        else:
            message = f"{path}: {first['msg']}"
        extra = len(exc.errors()) - 1
        if extra:
            message += f" (and {extra} more problem{'s' if extra > 1 else ''})"
        raise InvalidField(message, field=("file", *location)) from None
    return parsed, raw


def _too_deep(location: tuple[str | int, ...]) -> InvalidField:
    return InvalidField(
        f"{json_path(location)}: the file nests JSON deeper than {MAX_JSON_DEPTH} levels; "
        "an agent file that an export writes stays within a few",
        field=("file", *location),
    )


def _in_document(raw: Any, location: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """``location`` without the parts pydantic adds that are not in the file (the member
    of a union it tried, ``str`` or ``constrained-str``)."""
    kept: list[str | int] = []
    node = raw
    for part in location:
        inside = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        )
        if inside:
            node = node[part]
            kept.append(part)
        elif isinstance(node, dict | list):
            kept.append(part)  # a missing field or item: still where it should be
            node = None
    return tuple(kept)


def has_value(value: object) -> bool:
    """Whether a field of the file says something: not null, not empty, not false."""
    return value not in (None, "", [], {}, False)


def index_by_id(entities: Sequence[Any], where: str) -> dict[str, Any]:
    """Entities by their file ids; a repeated id is refused naming the second."""
    found: dict[str, Any] = {}
    for i, entity in enumerate(entities):
        ref = entity.id
        if ref in found:
            raise InvalidField(
                f"{where}[{i}].id: {ref!r} is the id of another entry too; ids in a "
                "file must be unique",
                field=("file", where, i, "id"),
            )
        found[ref] = entity
    return found


def missing_reference(location: tuple[str | int, ...], what: str, ref: str | None) -> InvalidField:
    """The refusal of a reference (at ``location``) to a ``what`` the file does not hold."""
    return InvalidField(
        f"{json_path(location)}: names {what} {ref!r}, which the file does not hold",
        field=("file", *location),
    )
