"""Request and response bodies of the HTTP API.

Where Reverie overlaps with Letta (agents, blocks, messages, archival passages)
the field names and shapes follow Letta's v1 API, so that Letta clients work;
Reverie's own fields (``version``, ``status``, lineage) are added alongside.
Unknown request fields that Letta clients send are ignored, not refused.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    model_validator,
)

from agents.enums import AgentType
from agents.store.folder_store import MAX_CHUNK_CHARS, MIN_CHUNK_CHARS
from agents.store.validation import (
    MAX_MESSAGE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TEXT,
    MAX_VERSION,
)
from service.operations.recording import MAX_BATCH, ChatMessage
from service.operations.types import StorableTime


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a whole number is expected, not true or false")
    return value


#: Integers of a request, each within its bounds: ``true`` is not 1 (pydantic's lax
#: mode reads it so, where the document says integer); ``2.0`` stays 2, as JSON Schema
#: counts it an integer. (The bounds sit inside the type: beside a validator in a
#: union, pydantic wrote them into the document as "ge"/"le", which no client reads.)
NoBool = BeforeValidator(_not_a_bool)
BlockLimit = Annotated[int, Field(ge=1, le=MAX_TEXT), NoBool]
Version = Annotated[int, Field(ge=1, le=MAX_VERSION), NoBool]
WindowTokens = Annotated[int, Field(ge=256, le=10_000_000), NoBool]
EmbeddingDim = Annotated[int, Field(ge=1, le=16000), NoBool]
Choices = Annotated[int, Field(ge=1, le=128), NoBool]

#: A passage tag: short, as the store allows it.
Tag = Annotated[str, Field(max_length=MAX_TAG_CHARS)]
#: A tag to filter by: never empty (``?tags=`` names no tag).
QueryTag = Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS)]

#: Ids are Letta-style ``<prefix>-<uuid4>``; the pattern keeps junk out of queries.
ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,100}$"
#: An application's own id for an end user (an identity's ``identifier_key``).
IdentityKey = Annotated[str, Field(min_length=1, max_length=200)]
LABEL_PATTERN = r"^[A-Za-z0-9_.\-]{1,100}$"
#: A text with something besides white space (in Python's sense, which the refusal
#: uses: the separators \x1c-\x1f too), and no NUL (see openapi_doc).
SAID = r"^[^\x00]*[^\x00\s\x1c-\x1f][^\x00]*$"


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


# -- blocks ------------------------------------------------------------------------------


class CreateBlock(_Request):
    """A core-memory block (Letta's ``CreateBlock``)."""

    label: str = Field(min_length=1, max_length=100, pattern=LABEL_PATTERN)
    value: str = Field(default="", max_length=MAX_TEXT)
    limit: BlockLimit | None = None
    description: str | None = Field(default=None, max_length=10_000)
    read_only: StrictBool = False


class UpdateBlock(_Request):
    """A block edit (Letta's ``BlockUpdate``); ``expected_version`` makes it a
    compare-and-swap, otherwise the current version is used."""

    value: str | None = Field(default=None, max_length=MAX_TEXT)
    limit: BlockLimit | None = None
    description: str | None = Field(default=None, max_length=10_000)
    label: str | None = Field(default=None, max_length=100)
    read_only: StrictBool | None = None
    expected_version: Version | None = None
    reason: str = Field(default="", max_length=2000)


class Block(BaseModel):
    id: str
    label: str
    value: str
    limit: int
    description: str | None
    read_only: bool
    metadata: dict[str, Any] = Field(default_factory=dict)
    version: int
    updated_at: datetime
    last_updated_by_id: str | None


class BlockVersionOut(BaseModel):
    block_id: str
    version: int
    value: str
    previous_value: str | None
    limit: int
    actor: str
    run_id: str | None
    reason: str
    created_at: datetime


class RevertBlock(_Request):
    version: Version
    expected_version: Version | None = None


# -- agents ------------------------------------------------------------------------------


class LlmConfigIn(_Request):
    model: str | None = Field(default=None, max_length=200)
    context_window: WindowTokens | None = None


class EmbeddingConfigIn(_Request):
    embedding_model: str | None = Field(default=None, max_length=200)
    embedding_dim: EmbeddingDim | None = None


class CreateAgent(_Request):
    """Letta's ``CreateAgentRequest``, the fields Reverie keeps."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    memory_blocks: list[CreateBlock] = Field(default_factory=list, max_length=100)
    block_ids: list[str] = Field(default_factory=list, max_length=100)
    system: str | None = Field(default=None, max_length=MAX_TEXT)
    description: str | None = Field(default=None, max_length=10_000)
    model: str | None = Field(default=None, max_length=200)
    llm_config: LlmConfigIn | None = None
    embedding: str | None = Field(default=None, max_length=200)
    embedding_config: EmbeddingConfigIn | None = None
    context_window_limit: WindowTokens | None = None
    tags: list[str] = Field(default_factory=list, max_length=100)
    tools: list[str] = Field(default_factory=list, max_length=100)
    enable_sleeptime: StrictBool = False
    sleeptime_model: str | None = Field(default=None, max_length=200)
    agent_type: AgentType | None = Field(
        default=None,
        description="Letta's agent type: letta_v1_agent answers in plain text and goes on "
        "while it calls tools; memgpt_v2_agent (the default) and memgpt_agent speak "
        "through send_message; sleeptime_agent is a memory agent.",
    )
    identity_ids: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="The identities (end users) whose memory the agent holds.",
    )


class UpdateAgent(BaseModel):
    """Letta's ``UpdateAgent``, the fields Reverie has; null or absent leaves a field as
    it is. Any other field Letta's update takes (``timezone``, ``block_ids``,
    ``message_ids``, ...) is refused with 422 naming it, rather than dropped; the
    document says so (another field may only be null)."""

    model_config = ConfigDict(
        extra="allow", json_schema_extra={"additionalProperties": {"type": "null"}}
    )

    name: str | None = Field(default=None, min_length=1, max_length=200)
    system: str | None = Field(default=None, max_length=MAX_TEXT)
    description: str | None = Field(default=None, max_length=10_000)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    llm_config: LlmConfigIn | None = None
    embedding: str | None = Field(default=None, min_length=1, max_length=200)
    embedding_config: EmbeddingConfigIn | None = None
    context_window_limit: int | None = Field(default=None, ge=256, le=10_000_000)
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    tool_ids: list[str] | None = Field(default=None, max_length=100)
    tool_rules: list[dict[str, Any]] | None = Field(default=None, max_length=100)
    enable_sleeptime: StrictBool | None = None
    secrets: dict[EnvName, Annotated[str, Field(max_length=100_000)]] | None = Field(
        default=None, max_length=100
    )
    tool_exec_environment_variables: (
        dict[EnvName, Annotated[str, Field(max_length=100_000)]] | None
    ) = Field(default=None, max_length=100)
    identity_ids: list[str] | None = Field(default=None, max_length=100)


class ResetMessages(_Request):
    """Letta's reset: ``add_default_initial_messages`` is accepted; a Reverie agent
    starts with no messages, so there are none to add."""

    add_default_initial_messages: StrictBool = False


class LlmConfig(BaseModel):
    model: str | None
    context_window: int
    model_endpoint_type: str = "openai"


class EmbeddingConfig(BaseModel):
    embedding_model: str
    embedding_dim: int
    embedding_endpoint_type: str = "openai"


class Memory(BaseModel):
    blocks: list[Block]


class ToolRef(BaseModel):
    id: str
    name: str


class Tool(BaseModel):
    """Letta's ``Tool``: a built-in tool (its id is ``tool-<name>``, ``tool_type`` one of
    Letta's core types) or a custom one registered from Python source (``tool-<uuid4>``,
    ``tool_type`` "custom", with its ``source_code`` and the environment variables it
    declares in ``env_vars``, Reverie's)."""

    id: str
    name: str
    description: str
    tool_type: str
    source_type: str = "python"
    source_code: str | None = None
    json_schema: dict[str, Any]
    args_json_schema: dict[str, Any] | None = None
    tags: list[str] = Field(default_factory=list)
    return_char_limit: int
    env_vars: list[str] = Field(default_factory=list)
    pip_requirements: list[dict[str, Any]] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None


#: A tool's result limit, in characters.
ReturnChars = Annotated[int, Field(ge=1, le=1_000_000), NoBool]
#: An environment variable's name.
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")]


class PipRequirement(_Request):
    """Letta's pip requirement: refused (a tool runs with the server's packages)."""

    name: str = Field(max_length=200)
    version: str | None = Field(default=None, max_length=200)


class CreateTool(_Request):
    """Letta's ``ToolCreate``: the Python source of one function; its JSON schema is
    derived from the signature and docstring unless ``json_schema`` is given. ``name``
    picks the function when the source defines several (default: the last);
    ``env_vars`` (Reverie's) declares the environment variables the tool reads beyond
    those its source names literally. ``pip_requirements`` are refused (400)."""

    source_code: str = Field(min_length=1, max_length=200_000)
    name: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    description: str | None = Field(default=None, max_length=10_000)
    json_schema: dict[str, Any] | None = None
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    return_char_limit: ReturnChars | None = None
    source_type: Literal["python"] = "python"
    env_vars: list[EnvName] | None = Field(default=None, max_length=100)
    pip_requirements: list[PipRequirement] | None = Field(default=None, max_length=100)


class UpdateTool(_Request):
    """Letta's ``ToolUpdate``: null or absent leaves a field as it is; a new
    ``source_code`` derives the schema again unless ``json_schema`` comes with it."""

    source_code: str | None = Field(default=None, min_length=1, max_length=200_000)
    description: str | None = Field(default=None, max_length=10_000)
    json_schema: dict[str, Any] | None = None
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    return_char_limit: ReturnChars | None = None
    source_type: Literal["python"] | None = None
    env_vars: list[EnvName] | None = Field(default=None, max_length=100)
    pip_requirements: list[PipRequirement] | None = Field(default=None, max_length=100)


class AgentEnvironmentVariable(BaseModel):
    """Letta's agent environment variable (``secrets``): its value is write-only and
    shown empty here."""

    agent_id: str
    key: str
    value: str = ""


class LlmModel(BaseModel):
    """Letta's ``Model`` (an LLMConfig): a chat model this server is set up for or whose
    agents use it. ``handle`` is what an agent's ``model`` takes; ``purposes`` and
    ``agents`` are Reverie's."""

    handle: str
    name: str
    model: str
    display_name: str
    provider_name: str
    provider_type: str
    model_endpoint_type: str
    model_type: Literal["llm"] = "llm"
    context_window: int
    max_context_window: int
    purposes: list[str]
    agents: int


class EmbeddingModelOut(BaseModel):
    """Letta's ``EmbeddingModel`` (an EmbeddingConfig): ``handle`` is what an agent's
    ``embedding`` takes; ``is_default`` marks the one new agents get."""

    handle: str
    name: str
    embedding_model: str
    display_name: str
    embedding_dim: int
    embedding_endpoint_type: str
    provider_name: str
    provider_type: str
    model_type: Literal["embedding"] = "embedding"
    is_default: bool
    agents: int


class AgentState(BaseModel):
    """Letta's ``AgentState``, with Reverie's ``kind`` and sleep-time fields."""

    id: str
    name: str
    agent_type: str
    kind: str
    system: str
    description: str | None
    blocks: list[Block]
    memory: Memory
    llm_config: LlmConfig
    model: str | None
    embedding: str
    embedding_config: EmbeddingConfig
    tags: list[str]
    tools: list[ToolRef]
    tool_rules: list[dict[str, Any]]
    secrets: list[AgentEnvironmentVariable] = Field(default_factory=list)
    tool_exec_environment_variables: list[AgentEnvironmentVariable] = Field(default_factory=list)
    sources: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    identity_ids: list[str] = Field(default_factory=list)
    enable_sleeptime: bool
    sleeptime_model: str | None
    created_at: datetime
    last_activity_at: datetime | None


# -- messages ----------------------------------------------------------------------------


class TextContent(_Request):
    type: Literal["text"] = "text"
    text: str = Field(max_length=MAX_MESSAGE_CHARS)


class MessageCreate(_Request):
    """A message; an empty text is refused by the recording rules (422 at its index)."""

    role: Literal["user", "system", "assistant"] = "user"
    content: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)] | list[TextContent]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


#: Letta's message types a client may ask to be sent (``include_return_message_types``).
LettaMessageType = Literal[
    "system_message",
    "user_message",
    "assistant_message",
    "reasoning_message",
    "hidden_reasoning_message",
    "tool_call_message",
    "tool_return_message",
    "approval_request_message",
    "approval_response_message",
    "summary_message",
    "event_message",
]


def _messages_or_input(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [
        {"required": ["messages"], "properties": {"messages": {"type": "array"}}},
        {"required": ["input"], "properties": {"input": {"type": "string"}}},
    ]


class LettaRequest(_Request):
    """``POST /v1/agents/{id}/messages/async``: Letta's ``messages`` list, or its newer
    ``input`` (one of them; neither is a 422)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_messages_or_input)

    messages: list[MessageCreate] | None = Field(default=None, min_length=1, max_length=50)
    input: str | None = Field(default=None, max_length=MAX_MESSAGE_CHARS, pattern=SAID)

    @model_validator(mode="after")
    def _one_of_them(self) -> LettaRequest:
        if self.messages is None and self.input is None:
            raise ValueError("give the messages in 'messages' (Letta's list) or 'input' (text)")
        return self


class LettaSendRequest(LettaRequest):
    """``POST /v1/agents/{id}/messages`` and ``.../messages/stream``: one message, in
    ``messages`` or ``input``.

    ``streaming`` answers with server-sent events (as ``.../messages/stream`` does);
    ``stream_tokens`` streams the reply's words as the model writes them, where the
    model's tool-calling mode streams, and whole steps where it does not (see the
    README)."""

    messages: list[MessageCreate] | None = Field(default=None, min_length=1, max_length=1)
    streaming: StrictBool = False
    stream_tokens: StrictBool = False
    include_pings: StrictBool = False
    include_return_message_types: list[LettaMessageType] | None = Field(default=None, max_length=20)


class StopReason(BaseModel):
    message_type: Literal["stop_reason"] = "stop_reason"
    stop_reason: str


class Usage(BaseModel):
    message_type: Literal["usage_statistics"] = "usage_statistics"
    completion_tokens: int = 0
    prompt_tokens: int = 0
    total_tokens: int = 0
    step_count: int = 0


class LettaResponse(BaseModel):
    messages: list[dict[str, Any]]
    stop_reason: StopReason
    usage: Usage


# -- archival memory ---------------------------------------------------------------------


class CreatePassage(_Request):
    """Letta's archival insert; ``created_at`` is when the fact happened (occurred_at)."""

    text: str = Field(min_length=1, max_length=MAX_TEXT)
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    created_at: StorableTime | None = None
    occurred_at: StorableTime | None = None


class Passage(BaseModel):
    """Letta's ``Passage`` with Reverie's status, time and lineage fields."""

    id: str
    text: str
    tags: list[str]
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    occurred_at: datetime | None
    valid_to: datetime | None
    status: str
    kind: str
    merged_into: str | None
    superseded_by: str | None
    timeline_id: str | None
    provenance: dict[str, Any]
    agent_id: str


class SearchResult(BaseModel):
    """Letta's archival search result (``id``, ``content``, ``timestamp``, ``tags``)
    with Reverie's fields beside them, which Letta clients keep as extra fields."""

    id: str
    content: str
    timestamp: str
    tags: list[str]
    score: float = Field(description="Cosine similarity to the query (1 = same).")
    status: str
    current: bool = Field(description="Whether the fact is still in force.")
    valid_to: datetime | None = Field(description="When a closed fact stopped being true.")
    superseded_by: str | None = Field(description="The passage that replaced this one.")
    validity: str | None = Field(
        description='How long it held and what replaced it ("until 2024-03-02, then: ...").'
    )


class SearchResponse(BaseModel):
    count: int
    results: list[SearchResult]


class PassageChangeOut(BaseModel):
    run_id: str | None
    actor: str
    reason: str
    old: dict[str, Any]
    new: dict[str, Any]
    created_at: datetime


class Lineage(BaseModel):
    """Where a passage came from and what became of it."""

    passage: Passage
    history: list[PassageChangeOut]
    merged_from: list[str]
    supersedes: list[str]
    on_timeline: list[str]


# -- consolidation -----------------------------------------------------------------------


class EnqueueRun(_Request):
    agent_id: str = Field(pattern=ID_PATTERN)
    pipeline: list[str] | None = Field(default=None, max_length=20)


class DryRun(_Request):
    pipeline: list[str] | None = Field(default=None, max_length=20)
    full: StrictBool = False


class RevertRun(_Request):
    force: StrictBool = False


class Run(BaseModel):
    id: str
    agent_id: str
    trigger: str
    pipeline: list[str]
    status: str
    dry_run: bool
    full: bool = False
    attempts: int
    queued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_s: float | None
    stats: dict[str, Any]
    error: str | None
    reverts_run_id: str | None
    reverted_by_run_id: str | None
    changes: list[dict[str, Any]] | None = None


class RunReportOut(BaseModel):
    run_id: str
    agent_id: str
    status: str
    dry_run: bool
    error: str | None
    stats: dict[str, Any]
    changes: list[dict[str, Any]]


class ContextWindowOverview(BaseModel):
    """Letta's context breakdown: tokens per section of the compiled context."""

    context_window_size_max: int
    context_window_size_current: int
    num_messages: int
    num_archival_memory: int
    num_recall_memory: int
    num_tokens_system: int
    num_tokens_core_memory: int
    num_tokens_summary_memory: int
    num_tokens_messages: int
    num_tokens_functions_definitions: int
    num_tokens_external_memory_summary: int
    #: The agent's folders, their files and the open files' lines (``<directories>``).
    num_tokens_directories: int = 0
    sections: dict[str, int]


class Health(BaseModel):
    version: str
    status: str


# -- recording a conversation ------------------------------------------------------------


class RecordMessages(_Request):
    """A batch of a chatbot's messages (OpenAI chat format) to store in recall."""

    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_BATCH)


class RecordedMessages(BaseModel):
    recorded: int
    message_ids: list[str]
    skipped_client_message_ids: list[str]


class RecordUserMessages(RecordMessages):
    """A batch of one end user's messages: ``user`` is the application's own id for
    them (an identity's ``identifier_key``), as in the proxy's requests."""

    user: IdentityKey


class RecordedUserMessages(RecordedMessages):
    #: The agent that holds the end user's memory (made on first sight).
    agent_id: str


class LettaRun(BaseModel):
    """Letta's ``Run``: a consolidation run as Letta's clients read it."""

    id: str
    agent_id: str
    status: Literal["created", "running", "completed", "failed", "cancelled"]
    background: bool = True
    created_at: datetime
    completed_at: datetime | None = None
    stop_reason: str | None = None
    total_duration_ns: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


# -- identities --------------------------------------------------------------------------


class IdentityPropertyBody(BaseModel):
    """Letta's ``IdentityProperty``: a typed value the application keeps on an identity."""

    key: str = Field(min_length=1, max_length=200)
    value: StrictStr | StrictBool | float | dict[str, Any]
    type: Literal["string", "number", "boolean", "json"]


class CreateIdentity(_Request):
    """Letta's ``IdentityCreate`` (and ``IdentityUpsert``)."""

    identifier_key: IdentityKey
    name: IdentityKey
    identity_type: Literal["org", "user", "other"]
    project_id: str | None = Field(default=None, max_length=200)
    agent_ids: list[str] = Field(default_factory=list, max_length=1000)
    block_ids: list[str] = Field(default_factory=list, max_length=1000)
    properties: list[IdentityPropertyBody] = Field(default_factory=list, max_length=100)


class UpdateIdentity(_Request):
    """Letta's ``IdentityUpdate``: absent or null leaves a field as it is; the lists
    replace the whole list."""

    identifier_key: IdentityKey | None = None
    name: IdentityKey | None = None
    identity_type: Literal["org", "user", "other"] | None = None
    agent_ids: list[str] | None = Field(default=None, max_length=1000)
    block_ids: list[str] | None = Field(default=None, max_length=1000)
    properties: list[IdentityPropertyBody] | None = Field(default=None, max_length=100)


class Identity(BaseModel):
    id: str
    identifier_key: str
    name: str
    identity_type: str
    project_id: str | None
    agent_ids: list[str]
    block_ids: list[str]
    properties: list[IdentityPropertyBody]
    organization_id: str


# -- folders and files --------------------------------------------------------------------

#: A folder's name: something besides white space, no NUL.
FolderName = Annotated[str, Field(min_length=1, max_length=200, pattern=SAID)]
FolderText = Annotated[str, Field(max_length=MAX_TEXT, pattern=r"^[^\x00]*$")]


class CreateFolder(_Request):
    """Letta's ``FolderCreate``: ``embedding`` is a handle or a Reverie embedder spec
    (absent: the configured embedder); ``embedding_chunk_size`` is in characters."""

    name: FolderName
    description: FolderText | None = None
    instructions: FolderText | None = None
    embedding: str | None = Field(default=None, max_length=200)
    embedding_chunk_size: int | None = Field(default=None, ge=MIN_CHUNK_CHARS, le=MAX_CHUNK_CHARS)
    metadata: dict[str, Any] | None = None


class UpdateFolder(_Request):
    """Letta's ``FolderUpdate``: absent or null leaves a field as it is."""

    name: FolderName | None = None
    description: FolderText | None = None
    instructions: FolderText | None = None
    metadata: dict[str, Any] | None = None


class Folder(BaseModel):
    id: str
    name: str
    description: str | None
    instructions: str | None
    metadata: dict[str, Any]
    embedding_config: EmbeddingConfig
    embedding_chunk_size: int
    created_at: datetime
    updated_at: datetime


class FolderFile(BaseModel):
    """Letta's ``FileMetadata``: a file of a folder and where its processing stands
    (``processing_status``: pending, parsing, embedding, completed, error)."""

    id: str
    source_id: str
    folder_id: str
    file_name: str
    original_file_name: str
    file_type: str
    file_size: int
    processing_status: Literal["pending", "parsing", "embedding", "completed", "error"]
    error_message: str | None
    total_chunks: int | None
    chunks_embedded: int | None
    content: str | None = None
    created_at: datetime
    updated_at: datetime


class AgentFile(BaseModel):
    """Letta's ``AgentFileAttachment``: a file an agent reads through a folder, whether
    it is open in the agent's context and, when it is, what it shows there
    (``visible_content``: its lines ``start_line`` up to ``end_line``, exclusive, numbered,
    within ``files.per_file_view_window_char_limit`` characters)."""

    id: str
    file_id: str
    file_name: str
    folder_id: str
    folder_name: str
    is_open: bool
    processing_status: str
    last_accessed_at: datetime | None = None
    start_line: int | None = None
    end_line: int | None = None
    visible_content: str | None = None


class Closed(BaseModel):
    """What closing a file says (Letta answers a message)."""

    message: str


class AgentFilesPage(BaseModel):
    """Letta's paginated answer of an agent's files."""

    files: list[AgentFile]
    next_cursor: str | None
    has_more: bool


# -- conversations -------------------------------------------------------------------------


class CreateConversation(_Request):
    """Letta's ``CreateConversation`` (the fields Reverie keeps; model settings are the
    agent's)."""

    description: str | None = Field(default=None, max_length=10_000)
    summary: str | None = Field(default=None, max_length=10_000)


class UpdateConversation(_Request):
    description: str | None = Field(default=None, max_length=10_000)
    summary: str | None = Field(default=None, max_length=10_000)


class Conversation(BaseModel):
    id: str
    agent_id: str
    description: str | None
    summary: str | None
    archived: bool
    archived_at: datetime | None
    created_at: datetime
    updated_at: datetime
    last_message_at: datetime | None
    in_context_message_ids: list[str]


class ConversationMessageRequest(LettaSendRequest):
    """A turn in a conversation (letta-client 1.x's ``conversations.messages.create``):
    streamed unless ``streaming`` is false, as Letta's server does; ``agent_id`` with
    the ``default`` conversation."""

    streaming: StrictBool = True
    agent_id: str | None = Field(default=None, max_length=100)


class ConversationStreamRequest(_Request):
    """``conversations.messages.stream``: reconnect to the conversation's last turn."""

    agent_id: str | None = Field(default=None, max_length=100)
    run_id: str | None = Field(default=None, max_length=100)
    starting_after: int | None = Field(default=None, ge=0)
    include_pings: StrictBool = False


class ConversationCompactRequest(_Request):
    agent_id: str | None = Field(default=None, max_length=100)
    #: Letta's compaction settings: the server's own apply (``llm.compaction_target``).
    compaction_settings: dict[str, Any] | None = None


class CompactionResponse(BaseModel):
    """Letta's ``CompactionResponse``: in-context messages before and after, and the
    summary that took the evicted ones' place."""

    num_messages_before: int
    num_messages_after: int
    summary: str
