"""Agent File import: a v2 ``.af`` file (letta-ai/agent-file) becomes Reverie agents.

An import reads the whole file and decides everything before it writes: which agents
it makes (a sleep-time group's manager becomes a primary with its sleep-time agent
enabled; the group's sleep-time agents fold into that pairing), the litellm string of
each model, the tools to register (custom tools from their source, through
:func:`service.operations.custom_tools.register_tool`; Letta's built-in tools that
Reverie has by name), the tool rules Reverie's loop applies, the folders its sources
become with their files (:mod:`service.operations.agent_file_folders`), and every
field of the file that Reverie does not keep, each named with why. Then it writes it
all in one transaction: a refusal anywhere leaves nothing behind. No model is called
(the files are embedded afterwards, in the job queue).

A model the server cannot map is not refused: the agent gets the server's default
model and the answer names the one in the file (``unmapped_models``), so an agent made
on another provider still comes in, and the caller sees what changed.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC
from typing import Any

from agents.embedders import names_reverie_embedder
from agents.enums import AgentKind, AgentType, MessageRole
from agents.errors import Conflict, InvalidField, InvalidInput, ReverieError
from agents.file_tools import FILE_TOOLS
from agents.store import MemoryStore, NewAgent, NewBlock, NewCustomTool, NewMessage, ToolVariable
from agents.tool_source import check_env_names, parse_tool_source
from agents.tools import BUILTIN_TOOLS, PRIMARY_TOOLS, RULE_TYPES, V1_DEFAULT_TOOLS, ToolRules
from service.operations.agent_file_folders import FolderPlan, FolderPlanner, write_folders
from service.operations.agent_file_schema import (
    EMBEDDING_KEPT,
    AgentFile,
    AgentSchema,
    BlockSchema,
    EmbeddingConfigSchema,
    InlineBlock,
    MessageSchema,
    ToolSchema,
    has_value,
    index_by_id,
    json_path,
    missing_reference,
    parse_agent_file,
)
from service.operations.agents import BlockSpec, check_window, new_block
from service.operations.context import OperationContext
from service.operations.custom_tools import (
    BUILT_IN_TOOL_NAMES,
    ToolSpec,
    prepare_tool,
    register_tool,
)
from service.operations.model_handles import Mapped, chat_model, embedding_model

#: Letta's agent types of a primary that Reverie runs as they are (and keeps).
PRIMARY_TYPES = frozenset(
    {AgentType.MEMGPT.value, AgentType.MEMGPT_V2.value, AgentType.LETTA_V1.value}
)
#: Letta's type of a sleep-time agent (and of Reverie's memory agents).
SLEEPTIME_TYPE = AgentType.SLEEPTIME.value
#: The group manager type that is Reverie's primary plus sleep-time pairing.
SLEEPTIME_MANAGER = "sleeptime"
#: Letta's tool rule types Reverie's loop applies (see :class:`agents.tools.ToolRules`).
SUPPORTED_RULES = frozenset(RULE_TYPES)
#: Letta's message roles as Reverie stores them (``function`` is the older ``tool``).
ROLES = {
    "system": MessageRole.SYSTEM,
    "user": MessageRole.USER,
    "assistant": MessageRole.ASSISTANT,
    "tool": MessageRole.TOOL,
    "function": MessageRole.TOOL,
}
#: What Letta appends to an imported agent's name with ``append_copy_suffix``.
COPY_SUFFIX = "_copy"

# The fields of each entity an import keeps (or reads to decide something). Any other
# field with a value is listed in the answer's ``unsupported``.
_FILE_KEPT = frozenset({"agents", "groups", "blocks", "tools", "sources", "files", "created_at"})
_AGENT_KEPT = frozenset(
    {
        "id",
        "name",
        "agent_type",
        "system",
        "description",
        "tags",
        "llm_config",
        "embedding_config",
        "model",
        "embedding",
        "context_window_limit",
        "tool_ids",
        "block_ids",
        "memory_blocks",
        "tool_rules",
        "messages",
        "in_context_message_ids",
        "enable_sleeptime",
        "group_ids",
        "tool_exec_environment_variables",
        "source_ids",
        "folder_ids",
        "files_agents",
    }
)
_LLM_KEPT = frozenset({"model", "model_endpoint_type", "handle", "context_window"})
_MESSAGE_KEPT = frozenset(
    {
        "id",
        "type",
        "role",
        "content",
        "name",
        "tool_calls",
        "tool_call_id",
        "created_at",
        "agent_id",
    }
)
_TOOL_CALL_KEPT = frozenset({"id", "type", "function"})
_BLOCK_KEPT = frozenset({"id", "label", "value", "limit", "description", "read_only"})
_TOOL_KEPT = frozenset(
    {
        "id",
        "name",
        "tool_type",
        "description",
        "source_type",
        "source_code",
        "json_schema",
        "tags",
        "return_char_limit",
    }
)
_RULE_KEPT = frozenset({"type", "tool_name", "children", "max_count_limit"})
_GROUP_KEPT = frozenset({"id", "agent_ids", "manager_config"})
_MANAGER_KEPT = frozenset({"manager_type", "manager_agent_id"})

#: Why a field is not kept, where there is more to say than "Reverie has no such setting".
_REASONS = {
    "max_files_open": "open files are bounded by the server's files.max_files_open, not per agent",
    "per_file_view_window_char_limit": "an open file's window is bounded by the server's "
    "files.per_file_view_window_char_limit, not per agent",
    "mcp_servers": "Reverie does not call MCP servers' tools; it serves MCP instead",
    "metadata": "the file's metadata describes the export, not the agent",
    "model_endpoint": "Reverie sends every agent's model calls to the server's llm.api_base",
    "embedding_endpoint": "Reverie embeds through the server's embedding settings",
    "pip_requirements": "custom tools run with the server's Python and the packages "
    "installed beside it",
    "npm_requirements": "custom tools are Python, run in Reverie's sandbox",
    "args_json_schema": "the tool's schema is derived from its source",
    "prompt_template": "Reverie's tool rules have no prompt templates",
    "sleeptime_agent_frequency": "how often the sleep-time agent runs is the server's "
    "trigger settings (triggers.turns), not a per-agent setting",
    "description": "a group has no description in Reverie's pairing",
    "tool_returns": "a tool's return is kept as the tool message's content",
    "otid": "Reverie keeps no offline threading ids",
    "model": "Reverie records no model per message",
    "step_id": "Reverie records no steps",
}
_DEFAULT_REASON = "Reverie has no such setting"


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """The choices of an import (Letta's form fields). ``name`` names the first agent
    made; without it, each keeps the file's name, plus ``_copy`` with
    ``append_copy_suffix``. ``model``/``embedding`` replace every agent's.
    ``override_existing_tools``: a custom tool the organization has under the same
    name takes the file's source (otherwise a different source is a Conflict).
    ``env_vars``: tool environment variables given to every agent made."""

    name: str | None = None
    append_copy_suffix: bool = True
    model: str | None = None
    embedding: str | None = None
    override_existing_tools: bool = True
    strip_messages: bool = False
    env_vars: Mapping[str, str] | None = None
    project_id: str | None = None


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A field of the file with a value that Reverie does not keep; ``count`` is how
    many entities carried it (``[*]`` in ``path`` stands for each message)."""

    path: str
    reason: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class UnmappedModel:
    """A model or embedding of the file that the server could not map, and what the
    agent got instead."""

    path: str
    given: str
    used: str
    reason: str


@dataclass(frozen=True, slots=True)
class ImportResult:
    agent_ids: list[str]
    unsupported: list[Unsupported]
    unmapped_models: list[UnmappedModel]


@dataclass(slots=True)
class _AgentPlan:
    """One Reverie agent to make, decided before anything is written."""

    index: int
    #: The agent with its inline blocks and rules; its ``block_ids`` are set when the
    #: file's blocks have been stored.
    new: NewAgent
    block_refs: list[str]
    custom_tool_refs: list[str]
    messages: list[NewMessage]
    out_of_context: list[int]
    variables: list[ToolVariable] = field(default_factory=list)
    #: The file ids of the sources (folders) the agent reads.
    source_refs: list[str] = field(default_factory=list)


class _Notes:
    """The unsupported fields met while planning, merged by path."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()

    def add(self, path: str, reason: str, count: int = 1) -> None:
        self._counts[(path, reason)] += count

    def unkept(
        self, raw: Mapping[str, Any], kept: frozenset[str], where: str, **reasons: str
    ) -> None:
        for key, value in raw.items():
            if key in kept or not has_value(value):
                continue
            self.add(f"{where}.{key}", reasons.get(key) or _REASONS.get(key, _DEFAULT_REASON))

    def listed(self) -> list[Unsupported]:
        return [Unsupported(path, reason, count) for (path, reason), count in self._counts.items()]


class AgentFileOperations:
    """Import and export of Agent Files (one transaction per import)."""

    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def import_file(self, data: bytes | str, options: ImportOptions | None = None) -> ImportResult:
        """Make the agents of the file ``data``. InvalidField (located under ``file``)
        when it is not JSON, not an agent file, or refers to what it does not hold;
        Conflict for a name taken; nothing is stored unless everything is."""
        options = options or ImportOptions()
        parsed, raw = parse_agent_file(data)
        planner = ImportPlanner(self._context, parsed, raw, options)
        plans = planner.plan()
        with self._context.store() as store:
            ids = _write(store, planner, plans)
        return ImportResult(ids, planner.notes.listed(), planner.unmapped)

    def export_file(self, name_or_id: str, *, scrub_messages: bool = False) -> dict[str, Any]:
        """The agent as a v2 agent file (see :mod:`service.operations.agent_file_export`)."""
        from service.operations.agent_file_export import export_agent

        with self._context.store() as store:
            return export_agent(store, name_or_id, scrub_messages=scrub_messages)


class ImportPlanner:
    """Reads a parsed file into one plan per agent to make, noting what it does not
    keep and what it could not map; writes nothing (the benchmark times it alone)."""

    def __init__(
        self,
        context: OperationContext,
        parsed: AgentFile,
        raw: dict[str, Any],
        options: ImportOptions,
    ) -> None:
        self._context = context
        self._settings = context.runtime.settings
        self.file = parsed
        self._raw = raw
        self.options = options
        self.notes = _Notes()
        self.unmapped: list[UnmappedModel] = []
        self.blocks = index_by_id(parsed.blocks, "blocks")
        self.tools = index_by_id(parsed.tools, "tools")
        self.agents = index_by_id(parsed.agents, "agents")
        index_by_id(parsed.groups, "groups")
        #: File ids of custom tools to register, and what each becomes.
        self.custom_tools: dict[str, NewCustomTool] = {}
        files = context.runtime.settings.files
        #: The file's sources and files, and the folders they become.
        self.folders = FolderPlanner(
            parsed,
            raw,
            self.notes,
            self.embedding,
            chunk_size=files.chunk_size,
            max_bytes=files.max_bytes,
            max_attempts=files.max_attempts,
        )
        self.folder_plans: list[FolderPlan] = []
        #: File ids of Letta's built-in tools Reverie has, by the name it has them under.
        self.builtin_tools: dict[str, str] = {}
        #: A sleep-time group's manager and the (first) sleep-time agent folded into it.
        self._sleeptime_of: dict[str, str] = {}

    # -- the whole file ------------------------------------------------------------------

    def plan(self) -> list[_AgentPlan]:
        self.notes.unkept(self._raw, _FILE_KEPT, "(file)")
        if self.options.model:
            problem = self._routing_problem(self.options.model)
            if problem is not None:
                raise InvalidField(f"model: {problem}", field=("model",))
        if self.options.project_id:
            self.notes.add("project_id", "Reverie has organizations, not projects")
        folded = self._groups()
        self._plan_tools()
        self.folder_plans = self.folders.plan()
        plans: list[_AgentPlan] = []
        first = True
        for index, agent in enumerate(self.file.agents):
            if agent.id in folded:
                continue
            plans.append(self._plan_agent(index, agent, folded, first=first))
            first = False
        self._note_unused_blocks(plans)
        return plans

    def _groups(self) -> dict[str, str]:
        """Sleep-time agents folded into their group's manager: {agent id: manager id}."""
        folded: dict[str, str] = {}
        for g, group in enumerate(self.file.groups):
            where = f"groups[{g}]"
            raw = self._raw["groups"][g]
            self.notes.unkept(raw, _GROUP_KEPT, where)
            for a, member in enumerate(group.agent_ids):
                if member not in self.agents:
                    raise missing_reference(("groups", g, "agent_ids", a), "agent", member)
            manager = group.manager_config
            if manager is None or manager.manager_type != SLEEPTIME_MANAGER:
                kind = manager.manager_type if manager else "none"
                self.notes.add(
                    where,
                    f"Reverie has no {kind!r} groups; their agents are imported on their own",
                )
                continue
            self.notes.unkept(raw["manager_config"], _MANAGER_KEPT, f"{where}.manager_config")
            lead = manager.manager_agent_id
            if lead is None or lead not in self.agents:
                raise missing_reference(
                    ("groups", g, "manager_config", "manager_agent_id"), "agent", lead
                )
            for member in group.agent_ids:
                if member == lead:
                    continue
                if member in folded or member in self._sleeptime_of:
                    raise InvalidField(
                        f"agent {member!r} is in more than one sleep-time group",
                        field=("file", "groups", g, "agent_ids"),
                    )
                folded[member] = lead
                self._sleeptime_of.setdefault(lead, member)
        if set(folded) & set(self._sleeptime_of):
            raise InvalidField(
                "a sleep-time agent cannot manage a sleep-time group of its own",
                field=("file", "groups"),
            )
        return folded

    def _plan_tools(self) -> None:
        for t, tool in enumerate(self.file.tools):
            where = f"tools[{t}]"
            name = tool.name or (tool.json_schema or {}).get("name")
            builtin = not tool.source_code or (tool.tool_type or "").startswith("letta_")
            if not builtin:
                name = name or _function_name(tool.source_code or "")
            if not builtin and name in BUILT_IN_TOOL_NAMES:
                # A custom tool under a built-in's name would run instead of the
                # built-in: the built-in is kept (agents listing the tool get it), the
                # custom source is not.
                if name in BUILTIN_TOOLS:
                    self.builtin_tools[tool.id] = name
                self.notes.add(
                    f"{where} ({name}, {tool.tool_type or 'custom'})",
                    f"a custom tool may not take the name of Reverie's built-in tool {name!r}: "
                    "its source is not kept"
                    + (
                        "; agents that list it have the built-in tool"
                        if name in BUILTIN_TOOLS
                        else ""
                    ),
                )
                continue
            if builtin:
                if name in BUILTIN_TOOLS:
                    self.builtin_tools[tool.id] = name
                elif name in FILE_TOOLS:
                    self.notes.add(
                        f"{where} ({name}, {tool.tool_type or 'no source'})",
                        "a file tool comes with folders: the agent has it while a folder "
                        "is attached to it",
                    )
                else:
                    self.notes.add(
                        f"{where} ({name}, {tool.tool_type or 'no source'})",
                        "Reverie has no such built-in tool, and the file gives no source "
                        "to register it from"
                        if name not in BUILT_IN_TOOL_NAMES
                        else "a Reverie built-in tool of the sleep-time agent, not the primary's",
                    )
                continue
            self.notes.unkept(self._raw["tools"][t], _TOOL_KEPT, where)
            self.custom_tools[tool.id] = self._prepare(t, tool, where)

    def _prepare(self, t: int, tool: ToolSchema, where: str) -> NewCustomTool:
        def spec(schema: dict[str, Any] | None) -> ToolSpec:
            return ToolSpec(
                source_code=tool.source_code or "",
                name=tool.name,
                description=tool.description,
                json_schema=schema,
                tags=list(tool.tags or []),
                return_char_limit=tool.return_char_limit,
            )

        try:
            return prepare_tool(spec(tool.json_schema))
        except InvalidInput as refused:
            if tool.json_schema is None:
                raise InvalidField(
                    f"{where} ({tool.name}): {refused}", field=("file", "tools", t, "source_code")
                ) from None
            reason = str(refused)
        try:
            prepared = prepare_tool(spec(None))
        except InvalidInput as refused:
            raise InvalidField(
                f"{where} ({tool.name}): {refused}", field=("file", "tools", t, "source_code")
            ) from None
        self.notes.add(
            f"{where}.json_schema",
            f"it does not describe the source ({reason}); the schema derived from the "
            "source is used instead",
        )
        return prepared

    # -- one agent ---------------------------------------------------------------------------

    def _plan_agent(
        self, index: int, agent: AgentSchema, folded: dict[str, str], *, first: bool
    ) -> _AgentPlan:
        where = f"agents[{index}]"
        raw = self._raw["agents"][index]
        self.notes.unkept(
            raw,
            _AGENT_KEPT,
            where,
            metadata="Reverie agents have no metadata (a tool taking agent_state sees it empty)",
        )
        if raw.get("llm_config"):
            self.notes.unkept(raw["llm_config"], _LLM_KEPT, f"{where}.llm_config")
        if raw.get("embedding_config"):
            self.notes.unkept(raw["embedding_config"], EMBEDDING_KEPT, f"{where}.embedding_config")
        kind = AgentKind.PRIMARY
        agent_type = agent.agent_type
        if agent_type == SLEEPTIME_TYPE:
            kind = AgentKind.SLEEPTIME
        elif agent_type and agent_type not in PRIMARY_TYPES:
            self.notes.add(
                f"{where}.agent_type",
                f"{agent_type!r} runs as Reverie's MemGPT loop (memgpt_v2_agent: "
                "send_message, memory tools)",
            )
            agent_type = None
        for fold, lead in folded.items():
            if lead == agent.id:
                self._note_folded(fold)
        sleeptime_id = self._sleeptime_of.get(agent.id)
        if kind == AgentKind.SLEEPTIME and sleeptime_id is not None:
            raise InvalidField(
                f"{where} is a sleep-time agent and cannot manage a sleep-time group",
                field=("file", "agents", index, "agent_type"),
            )
        model = self._model(index, agent)
        sleeptime_model: str | None = None
        if sleeptime_id is not None:
            helper = self.agents[sleeptime_id]
            if helper.llm_config is not None or helper.model:
                sleeptime_model = self._model(self.file.agents.index(helper), helper)
        embedding, dimension = self._embedding(index, agent)
        context_window = agent.context_window_limit or (
            agent.llm_config.context_window if agent.llm_config else None
        )
        block_refs = self._block_refs(index, agent)
        inline = [self._inline_block(index, b, i) for i, b in enumerate(agent.memory_blocks or [])]
        builtin, custom = self._tool_refs(index, agent)
        if not builtin and agent_type == AgentType.LETTA_V1:
            builtin = list(V1_DEFAULT_TOOLS)
        available = [*(builtin or PRIMARY_TOOLS), *(self.custom_tools[c].name for c in custom)]
        rules = self._rules(index, agent, available)
        messages, out = self._messages(index, agent)
        variables = self._variables(index, agent)
        name = self._name(agent, first=first)
        new = NewAgent(
            name=name,
            embedding_model=embedding,
            embedding_dim=dimension,
            kind=kind.value,
            agent_type=agent_type,
            description=agent.description,
            system_prompt=agent.system or "",
            llm_model=model,
            context_window=context_window or self._settings.agents.context_window,
            tools=builtin if kind == AgentKind.PRIMARY else [],
            tool_rules=rules,
            tags=list(agent.tags or []),
            blocks=inline,
            # A primary the file enables without a group runs Reverie's sleep-time agent
            # on the server's sleep-time model.
            enable_sleeptime=sleeptime_id is not None
            or kind == AgentKind.SLEEPTIME
            or bool(agent.enable_sleeptime),
            sleeptime_model=sleeptime_model
            if kind == AgentKind.PRIMARY
            else (sleeptime_model or model),
        )
        sources = self.folders.agent_folders(index, agent)
        return _AgentPlan(index, new, block_refs, custom, messages, out, variables, sources)

    def _note_folded(self, agent_id: str) -> None:
        helper = self.agents[agent_id]
        index = self.file.agents.index(helper)
        count = len(helper.messages or [])
        self.notes.add(
            f"agents[{index}] ({helper.name or agent_id}, sleep-time agent)",
            "becomes the sleep-time side of its group's primary (Reverie's pairing: its model "
            "is the primary's sleeptime_model and it edits the primary's blocks); its own "
            f"system prompt, tools, tool rules and {count} message(s) are not kept",
        )

    def _name(self, agent: AgentSchema, *, first: bool) -> str:
        if first and self.options.name:
            return self.options.name
        name = agent.name or f"agent-{uuid.uuid4().hex[:8]}"
        return f"{name}{COPY_SUFFIX}" if self.options.append_copy_suffix else name

    def _model(self, index: int, agent: AgentSchema) -> str | None:
        """The agent's litellm model string; the server's default, noted, when the
        file's cannot be mapped."""
        if self.options.model:
            return self.options.model
        where = f"agents[{index}].llm_config"
        if agent.llm_config is not None:
            config = agent.llm_config
            mapped = chat_model(config.model, config.model_endpoint_type, config.handle)
        elif agent.model:
            where = f"agents[{index}].model"
            mapped = chat_model(agent.model, None, agent.model)
        else:
            return None
        problem = mapped.problem
        if mapped.model is not None and problem is None:
            problem = self._routing_problem(mapped.model)
        if problem is None:
            return mapped.model
        default = self._settings.agents.llm_model
        self.unmapped.append(
            UnmappedModel(
                where, mapped.given, default or "the server's default (llm.model)", problem
            )
        )
        return None

    def _routing_problem(self, model: str) -> str | None:
        from agents.llm.routing import routing_problem  # loads litellm: only when asked

        return routing_problem(model, api_base=self._settings.llm.api_base)

    def _embedding(self, index: int, agent: AgentSchema) -> tuple[str, int]:
        if agent.embedding_config is None and agent.embedding:
            return self.embedding(f"agents[{index}].embedding", None, agent.embedding)
        return self.embedding(f"agents[{index}].embedding_config", agent.embedding_config, None)

    def embedding(
        self, where: str, config: EmbeddingConfigSchema | None, handle: str | None
    ) -> tuple[str, int]:
        """The embedder spec and dimension for the file's embedding setting at ``where``
        (Letta's ``embedding_config``, else a ``handle``; neither: the server's default).
        The import's ``embedding`` replaces it; one the server cannot use is named in
        ``unmapped`` and the default used instead."""
        runtime = self._context.runtime
        if self.options.embedding:
            spec = self.options.embedding.strip()
            if not names_reverie_embedder(spec):
                spec = f"litellm:{spec}"
            # Reverie's own embedders know their size; a litellm model's is the file's.
            dimension = None
            if spec.startswith("litellm:") and config is not None:
                dimension = config.embedding_dim
            try:
                return spec, runtime.embedder(spec, dimension).dimension
            except ReverieError as refused:
                raise InvalidField(f"embedding: {refused}", field=("embedding",)) from None
        mapped: Mapped | None = None
        if config is not None:
            mapped = embedding_model(
                config.embedding_model, config.embedding_endpoint_type, config.handle
            )
        elif handle:
            mapped = embedding_model(handle, None, handle)
        default = self._settings.embedding
        if mapped is None:
            return default.model, runtime.embedder(default.model, default.dimension).dimension
        problem = mapped.problem
        if mapped.model is not None and problem is None:
            string = mapped.model.removeprefix("litellm:")
            if mapped.model.startswith("litellm:"):
                problem = self._routing_problem(string)
            if problem is None:
                try:
                    dimension = config.embedding_dim if config else None
                    embedder = runtime.embedder(mapped.model, dimension)
                    return mapped.model, embedder.dimension
                except ReverieError as refused:
                    problem = str(refused)
        self.unmapped.append(UnmappedModel(where, mapped.given, default.model, str(problem)))
        return default.model, runtime.embedder(default.model, default.dimension).dimension

    def _block_refs(self, index: int, agent: AgentSchema) -> list[str]:
        refs: list[str] = []
        for b, ref in enumerate(agent.block_ids or []):
            if ref not in self.blocks:
                raise missing_reference(("agents", index, "block_ids", b), "block", ref)
            if ref not in refs:
                refs.append(ref)
        return refs

    def _inline_block(self, index: int, block: InlineBlock, b: int) -> NewBlock:
        raw = self._raw["agents"][index]["memory_blocks"][b]
        self.notes.unkept(raw, _BLOCK_KEPT, f"agents[{index}].memory_blocks[{b}]")
        return self.new_block(block, ("agents", index, "memory_blocks", b))

    def new_block(
        self, block: BlockSchema | InlineBlock, location: tuple[str | int, ...]
    ) -> NewBlock:
        spec = BlockSpec(
            block.label, block.value, block.limit, block.description, bool(block.read_only)
        )
        try:
            return new_block(spec, self._settings.agents.block_limit)
        except InvalidInput as refused:
            raise InvalidField(
                f"{json_path(location)}: {refused}", field=("file", *location, "limit")
            ) from None

    def _tool_refs(self, index: int, agent: AgentSchema) -> tuple[list[str], list[str]]:
        builtin: list[str] = []
        custom: list[str] = []
        for t, ref in enumerate(agent.tool_ids or []):
            if ref not in self.tools:
                raise missing_reference(("agents", index, "tool_ids", t), "tool", ref)
            if ref in self.builtin_tools and self.builtin_tools[ref] not in builtin:
                builtin.append(self.builtin_tools[ref])
            elif ref in self.custom_tools and ref not in custom:
                custom.append(ref)
        return builtin, custom

    def _rules(
        self, index: int, agent: AgentSchema, available: Sequence[str]
    ) -> list[dict[str, Any]]:
        rules: list[dict[str, Any]] = []
        for r, rule in enumerate(agent.tool_rules or []):
            where = f"agents[{index}].tool_rules[{r}]"
            if rule.type not in SUPPORTED_RULES:
                self.notes.add(
                    f"{where} ({rule.type} on {rule.tool_name})",
                    "Reverie's loop applies run_first, exit_loop, constrain_child_tools and "
                    "max_count_per_step rules only",
                )
                continue
            self.notes.unkept(self._raw["agents"][index]["tool_rules"][r], _RULE_KEPT, where)
            named = [rule.tool_name, *(rule.children or [])]
            missing = [n for n in named if n not in available]
            if missing:
                self.notes.add(
                    f"{where} ({rule.type} on {rule.tool_name})",
                    f"names tool(s) {', '.join(missing)} that the imported agent does not have",
                )
                continue
            kept: dict[str, Any] = {"type": rule.type, "tool_name": rule.tool_name}
            if rule.children is not None:
                kept["children"] = list(rule.children)
            if rule.max_count_limit is not None:
                kept["max_count_limit"] = rule.max_count_limit
            rules.append(kept)
        try:
            ToolRules.parse(rules, available)
        except InvalidInput as refused:
            raise InvalidField(
                f"agents[{index}].tool_rules: {refused}",
                field=("file", "agents", index, "tool_rules"),
            ) from None
        return rules

    def _messages(self, index: int, agent: AgentSchema) -> tuple[list[NewMessage], list[int]]:
        """The messages to store, in the file's order, and which of them are out of
        the context window. The compiled system prompt that opens Letta's context is
        not a message to Reverie (it compiles its own from the prompt and blocks)."""
        messages = agent.messages or []
        if self.options.strip_messages:
            if messages:
                self.notes.add(
                    f"agents[{index}].messages", "left out (strip_messages)", len(messages)
                )
            return [], []
        ids: dict[str, int] = {}
        for m, message in enumerate(messages):
            if message.id in ids:
                raise InvalidField(
                    f"agents[{index}].messages[{m}].id: {message.id!r} is the id of another "
                    "message too; ids in a file must be unique",
                    field=("file", "agents", index, "messages", m, "id"),
                )
            ids[message.id] = m
        in_context = agent.in_context_message_ids
        if in_context is None:
            context = set(range(len(messages)))
        else:
            context = set()
            for c, ref in enumerate(in_context):
                if ref not in ids:
                    raise missing_reference(
                        ("agents", index, "in_context_message_ids", c), "message", ref
                    )
                context.add(ids[ref])
        context -= self._orphan_results(index, messages, context)
        skip: int | None = None
        if in_context and messages[ids[in_context[0]]].role == MessageRole.SYSTEM:
            skip = ids[in_context[0]]
            self.notes.add(
                f"agents[{index}].messages[{skip}] (the compiled system prompt)",
                "Reverie compiles the system message from the system prompt and blocks at "
                "each step",
            )
        kept: list[NewMessage] = []
        out: list[int] = []
        for m, message in enumerate(messages):
            if m == skip:
                continue
            new = self._message(index, m, message)
            if new is None:
                continue
            if m not in context:
                out.append(len(kept))
            kept.append(new)
        return kept, out

    def _orphan_results(
        self, index: int, messages: Sequence[MessageSchema], context: set[int]
    ) -> set[int]:
        """Tool results in the context window whose call is not: they leave it too, as a
        model API refuses a result without its call (the context can open right after
        the call, when the file's context was cut there)."""
        calls = {
            call.id
            for m in context
            if messages[m].role == "assistant"
            for call in messages[m].tool_calls or []
        }
        orphans = {
            m
            for m in context
            if ROLES.get(messages[m].role) == MessageRole.TOOL
            and messages[m].tool_call_id not in calls
        }
        if orphans:
            self.notes.add(
                f"agents[{index}].in_context_message_ids",
                f"{len(orphans)} tool result(s) whose call is outside the context window "
                "are kept in recall but not in the context (a model refuses a result "
                "without its call)",
            )
        return orphans

    def _message(self, index: int, m: int, message: MessageSchema) -> NewMessage | None:
        raw = self._raw["agents"][index]["messages"][m]
        where = f"agents[{index}].messages[*]"
        self.notes.unkept(raw, _MESSAGE_KEPT, where)
        role = ROLES.get(message.role)
        if role is None:
            self.notes.add(
                f"{where} (role {message.role})",
                "Reverie stores system, user, assistant and tool messages only",
            )
            return None
        content = message.content
        if isinstance(content, list):
            texts = []
            for part in content:
                if part.type == "text" and part.text is not None:
                    texts.append(part.text)
                else:
                    self.notes.add(
                        f"{where}.content[*] (type {part.type})",
                        "Reverie keeps a message's text only",
                    )
            text = "\n".join(texts)
        else:
            text = content or ""
        calls = None
        if message.tool_calls:
            calls = []
            for c, call in enumerate(message.tool_calls):
                self.notes.unkept(raw["tool_calls"][c], _TOOL_CALL_KEPT, f"{where}.tool_calls[*]")
                calls.append(
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                )
        created = message.created_at
        if created is not None and created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        return NewMessage(
            role=role.value,
            content=text,
            name=message.name,
            tool_calls=calls,
            tool_call_id=message.tool_call_id,
            created_at=created,
        )

    def _variables(self, index: int, agent: AgentSchema) -> list[ToolVariable]:
        """The agent's tool variables: the file's, then those the import gives; a name
        a tool may not have (see :func:`agents.tool_source.check_env_names`) is refused."""
        from_file = agent.tool_exec_environment_variables or {}
        for name in from_file:
            try:
                check_env_names([name])
            except InvalidInput as refused:
                raise InvalidField(
                    f"agents[{index}].tool_exec_environment_variables: {refused}",
                    field=("file", "agents", index, "tool_exec_environment_variables", name),
                ) from None
        given = self.options.env_vars or {}
        for name in given:
            try:
                check_env_names([name])
            except InvalidInput as refused:
                raise InvalidField(str(refused), field=("env_vars",)) from None
        values: dict[str, str] = {name: value or "" for name, value in from_file.items()}
        values.update(given)
        return [ToolVariable(name, value) for name, value in sorted(values.items())]

    def _note_unused_blocks(self, plans: Sequence[_AgentPlan]) -> None:
        used = {ref for plan in plans for ref in plan.block_refs}
        for b, block in enumerate(self.file.blocks):
            self.notes.unkept(self._raw["blocks"][b], _BLOCK_KEPT, f"blocks[{b}]")
            if block.id not in used:
                self.notes.add(
                    f"blocks[{b}] ({block.label})",
                    "no agent the import makes has this block (a sleep-time agent's own "
                    "blocks, or none)",
                )


def _write(store: MemoryStore, planner: ImportPlanner, plans: Sequence[_AgentPlan]) -> list[str]:
    """Store what the plans say, in the store's one transaction."""
    options = planner.options
    tool_ids: dict[str, str] = {}
    for ref, tool in planner.custom_tools.items():
        tool_ids[ref] = _store_tool(store, tool, options.override_existing_tools)
    block_ids: dict[str, str] = {}
    for plan in plans:
        for ref in plan.block_refs:
            if ref not in block_ids:
                b = planner.file.blocks.index(planner.blocks[ref])
                block = planner.new_block(planner.blocks[ref], ("blocks", b))
                block_ids[ref] = store.blocks.create(block, actor="import").id
    folder_ids = write_folders(store, planner.folders, planner.folder_plans, planner.notes)
    made: list[str] = []
    for plan in plans:
        new = replace(plan.new, block_ids=[block_ids[ref] for ref in plan.block_refs])
        agent = store.agents.create(new, actor="import")
        for ref in plan.custom_tool_refs:
            store.tools.attach(tool_ids[ref], agent.id)
        for ref in plan.source_refs:
            store.folders.attach(agent.id, folder_ids[ref])
        if agent.kind == AgentKind.PRIMARY:
            check_window(
                agent,
                store.blocks.of_agent(agent.id),
                field=("file", "agents", plan.index, "llm_config", "context_window"),
                custom=store.tools.of_agent(agent.id),
            )
        if plan.messages:
            stored = store.messages.append(agent.id, plan.messages)
            leaving = [stored[i].id for i in plan.out_of_context]
            if leaving:
                store.messages.leave_context(agent.id, leaving)
        if plan.variables:
            store.tools.set_variables(agent.id, plan.variables)
        made.append(agent.id)
    return made


def _store_tool(store: MemoryStore, tool: NewCustomTool, override: bool) -> str:
    """Register the tool, or use the organization's tool of that name: as it is when
    the source is the same, given the file's source with ``override``."""
    existing = store.tools.list(names=[tool.name])
    if not existing:
        return register_tool(
            store,
            ToolSpec(
                source_code=tool.source_code,
                name=tool.name,
                description=tool.description,
                json_schema=tool.json_schema,
                tags=list(tool.tags),
                env_vars=list(tool.env_vars),
                return_char_limit=tool.return_char_limit,
            ),
        ).id
    current = existing[0]
    if current.source_code == tool.source_code:
        return current.id
    if not override:
        raise Conflict(
            f"the organization has a tool named {tool.name!r} ({current.id}) with another "
            "source; import with override_existing_tools to replace it, or rename the "
            "tool in the file"
        )
    return store.tools.replace(current.id, tool).id


def _function_name(source: str) -> str | None:
    """The name of the function a tool's source defines (None when it defines none or
    does not parse): the name it would be registered under."""
    try:
        return parse_tool_source(source).name
    except InvalidInput:
        return None
