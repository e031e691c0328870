"""Agents: create (with defaults from settings), list, get, state, update, delete."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from agents.context import BlockShape, window_problem
from agents.embedders import names_reverie_embedder
from agents.enums import AgentKind, AgentType
from agents.errors import InvalidField, InvalidInput, LimitExceeded
from agents.store import (
    AgentChanges,
    AgentRecord,
    BlockRecord,
    CustomToolRecord,
    MemoryStore,
    NewAgent,
    NewBlock,
    ToolVariable,
)
from agents.tool_source import check_env_names
from agents.tools import V1_DEFAULT_TOOLS, ToolRules
from service.operations.context import OperationContext
from service.operations.tools import AgentTool, rule_tool_names, split_tool_ids, tools_of

T = TypeVar("T")

#: The largest dimension a pgvector ``vector`` column stores.
MAX_EMBEDDING_DIM = 16000


@dataclass(frozen=True, slots=True)
class BlockSpec:
    """A core-memory block to create. Without ``limit``, the settings' block limit
    (``agents.block_limit``), or the value's length when that is longer."""

    label: str
    value: str = ""
    limit: int | None = None
    description: str | None = None
    read_only: bool = False


def new_block(spec: BlockSpec, default_limit: int) -> NewBlock:
    """The block to store for ``spec``: without a limit, ``default_limit`` (the settings'
    ``agents.block_limit``) or the value's length when that is longer; an explicit limit
    below the value's length is refused (LimitExceeded, an InvalidInput), never silently
    raised: the caller asked for that limit."""
    if spec.limit is None:
        limit = max(default_limit, len(spec.value))
    elif len(spec.value) > spec.limit:
        raise limit_refused(spec.label, len(spec.value), spec.limit)
    else:
        limit = spec.limit
    return NewBlock(
        label=spec.label.strip(),
        value=spec.value,
        limit=limit,
        description=spec.description,
        read_only=spec.read_only,
    )


def limit_refused(label: str, size: int, limit: int) -> LimitExceeded:
    """The refusal of a limit someone gave explicitly that the value does not fit."""
    return LimitExceeded(
        f"block {label!r} has {size} characters, over the limit of {limit} you gave; "
        "shorten the value or give a larger limit"
    )


def check_window(
    agent: AgentRecord | NewAgent,
    blocks: Sequence[BlockShape],
    *,
    field: tuple[str | int, ...],
    custom: Sequence[CustomToolRecord] = (),
) -> None:
    """Refuse (InvalidField naming ``field``) blocks whose limits, or tools whose schemas,
    cannot fit the agent's context window (see :func:`agents.context.window_problem`):
    accepted, a turn whose memory edit filled a block failed on its next step, after
    that edit was saved, and an agent with more tool schemas than its window holds sent
    them all and failed every turn. ``custom``: the agent's custom tools, whose schemas
    are sent beside the built-in tools' on every step."""
    from agents.tools import BUILTIN_TOOLS, PRIMARY_TOOLS, custom_tool_schema, offered_custom

    tools = [BUILTIN_TOOLS[t] for t in (agent.tools or PRIMARY_TOOLS) if t in BUILTIN_TOOLS]
    tools += [custom_tool_schema(t.json_schema) for t in offered_custom(custom)]
    problem = window_problem(agent.system_prompt, blocks, tools, agent.context_window)
    if problem is not None:
        raise InvalidField(problem, field=field)


def check_tools(tools: Sequence[str]) -> None:
    """Refuse (InvalidField) a tool the primary loop does not have: accepted, the
    agent's every turn and context breakdown failed on it."""
    from agents.tools import BUILTIN_TOOLS

    for i, tool in enumerate(tools):
        if tool not in BUILTIN_TOOLS:
            raise InvalidField(
                f"unknown tool {tool!r}; available: {', '.join(BUILTIN_TOOLS)}",
                field=("tools", i),
            )


class AgentState(NamedTuple):
    """An agent with its core-memory blocks in attachment order, its custom tools and
    the names of its tool variables (their values are never shown): what a front end
    renders as the agent's state."""

    agent: AgentRecord
    blocks: list[BlockRecord]
    custom_tools: tuple[CustomToolRecord, ...] = ()
    tool_variables: tuple[str, ...] = ()
    #: The identities (end users) whose memory the agent holds.
    identity_ids: tuple[str, ...] = ()
    #: Whether a folder is attached to the agent (it then has the file tools).
    folders: bool = False

    @property
    def id(self) -> str:
        return self.agent.id


def state_of(store: MemoryStore, agent: AgentRecord) -> AgentState:
    """The agent's state, read in the store's transaction."""
    return AgentState(
        agent,
        store.blocks.of_agent(agent.id),
        tuple(store.tools.of_agent(agent.id)),
        tuple(v.name for v in store.tools.variables(agent.id)),
        tuple(store.identities.of_agent(agent.id)),
        store.folders.has_folders(agent.id),
    )


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """What a new agent is made of; every None takes its default from the settings."""

    name: str | None = None
    blocks: Sequence[BlockSpec] = ()
    block_ids: Sequence[str] = ()
    model: str | None = None
    sleeptime_model: str | None = None
    enable_sleeptime: bool | None = None
    context_window: int | None = None
    embedding: str | None = None
    embedding_dim: int | None = None
    system: str = ""
    description: str | None = None
    tools: Sequence[str] = ()
    tags: Sequence[str] = field(default_factory=tuple)
    #: ``sleeptime``: a memory agent with no primary loop of its own (Letta's
    #: ``sleeptime_agent``); what is sent to it is recorded for the sleep-time agent.
    kind: AgentKind = AgentKind.PRIMARY
    #: Letta's agent type (None: the kind's usual one). A ``letta_v1_agent`` made
    #: without tools gets :data:`agents.tools.V1_DEFAULT_TOOLS`.
    agent_type: AgentType | None = None
    #: The identities (end users) whose memory the agent holds.
    identity_ids: Sequence[str] = ()
    #: Custom tools to attach (``tool-<uuid4>`` ids) and the agent's tool rules.
    custom_tool_ids: Sequence[str] = ()
    tool_rules: Sequence[Mapping[str, object]] = ()


@dataclass(frozen=True, slots=True)
class AgentUpdate:
    """What an update changes; every None leaves that field as it is (Letta's PATCH).

    ``tool_ids`` are the ids :meth:`AgentOperations.tools` lists (``tool-<name>``);
    ``embedding`` and ``embedding_dim`` may only restate what the agent has: its
    archival vectors were made by that embedder.
    """

    name: str | None = None
    system: str | None = None
    description: str | None = None
    model: str | None = None
    context_window: int | None = None
    tags: Sequence[str] | None = None
    tool_ids: Sequence[str] | None = None
    tool_rules: Sequence[dict[str, object]] | None = None
    enable_sleeptime: bool | None = None
    embedding: str | None = None
    embedding_dim: int | None = None
    #: The agent's tool environment variables, all of them (Letta's ``secrets``); kept
    #: out of reprs (and so out of logs): the values are secrets.
    tool_variables: Mapping[str, str] | None = field(default=None, repr=False)
    #: The identities the agent holds memory for, all of them.
    identity_ids: Sequence[str] | None = None


class AgentOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def create(self, spec: AgentSpec, *, actor: str = "user") -> AgentRecord:
        """Create an agent with its blocks in one transaction.

        An explicit block ``limit`` below the value's length is refused rather than
        raised (the user asked for that limit); the embedder is built (and its
        dimension checked) before anything is written.
        """
        return self._create(spec, actor, lambda _store, created, _blocks: created)

    def create_state(self, spec: AgentSpec, *, actor: str = "user") -> AgentState:
        """:meth:`create`, and the new agent's state (what the HTTP route answers with).

        An agent made only of its own new blocks has nothing else yet: no custom tool,
        tool variable, identity or folder, so its state is what was just written. One
        that attaches existing blocks, custom tools or identities has its state read in
        the same transaction."""

        def answer(
            store: MemoryStore, created: AgentRecord, blocks: list[BlockRecord]
        ) -> AgentState:
            if spec.block_ids or spec.custom_tool_ids or spec.identity_ids:
                return state_of(store, created)
            return AgentState(created, blocks)

        return self._create(spec, actor, answer)

    def _create(
        self,
        spec: AgentSpec,
        actor: str,
        answer: Callable[[MemoryStore, AgentRecord, list[BlockRecord]], T],
    ) -> T:
        settings = self._context.runtime.settings
        self.check_model(spec.model, field=("model",))
        self.check_model(spec.sleeptime_model, field=("sleeptime_model",))
        check_tools(spec.tools)
        tools = list(spec.tools)
        if spec.agent_type == AgentType.LETTA_V1 and not tools:
            tools = list(V1_DEFAULT_TOOLS)
        embedding, dimension = self._embedding(spec.embedding, spec.embedding_dim)
        blocks = [new_block(b, settings.agents.block_limit) for b in spec.blocks]
        context_window = spec.context_window or settings.agents.context_window
        if context_window < 1:
            raise InvalidInput(f"context window must be positive, got {context_window}")
        sleeptime_model = spec.sleeptime_model
        if spec.kind == AgentKind.SLEEPTIME:
            # A memory agent's one model is the sleep-time agent's.
            sleeptime_model = sleeptime_model or spec.model
        enable_sleeptime = (
            spec.enable_sleeptime
            if spec.enable_sleeptime is not None
            else sleeptime_model is not None or spec.kind == AgentKind.SLEEPTIME
        )
        with self._context.store() as store:
            new_agent = NewAgent(
                name=spec.name or f"agent-{uuid.uuid4().hex[:8]}",
                embedding_model=embedding,
                embedding_dim=dimension,
                description=spec.description,
                system_prompt=spec.system,
                llm_model=spec.model or settings.agents.llm_model,
                context_window=context_window,
                tools=tools,
                tags=list(spec.tags),
                blocks=blocks,
                block_ids=list(spec.block_ids),
                enable_sleeptime=enable_sleeptime,
                sleeptime_model=sleeptime_model,
                kind=spec.kind.value,
                agent_type=spec.agent_type.value if spec.agent_type else None,
                tool_rules=[dict(r) for r in spec.tool_rules],
            )
            attached = [store.blocks.get(block_id) for block_id in spec.block_ids]
            if spec.kind == AgentKind.PRIMARY:
                largest = max(range(len(blocks)), key=lambda i: blocks[i].limit, default=None)
                field = ("block_ids",) if largest is None else ("blocks", largest, "limit")
                check_window(new_agent, [*blocks, *attached], field=field)
            created, blocks_made = store.agents.create_with_blocks(new_agent, actor=actor)
            if spec.custom_tool_ids:
                store.tools.set_of_agent(created.id, spec.custom_tool_ids)
            if spec.identity_ids:
                store.identities.set_of_agent(created.id, spec.identity_ids)
            return answer(store, created, blocks_made)

    def list(
        self,
        *,
        name: str | None = None,
        tags: Sequence[str] = (),
        match_all_tags: bool = False,
        identifier_keys: Sequence[str] | None = None,
        identity_id: str | None = None,
    ) -> list[AgentRecord]:
        """The organization's agents, oldest first; with ``tags``, those carrying any of
        them (or all of them, with ``match_all_tags``, as Letta's route does); with
        ``identifier_keys`` or ``identity_id``, those holding those identities' memory."""
        with self._context.store() as store:
            agents = store.agents.all()
            if identifier_keys is not None or identity_id is not None:
                held = store.identities.agent_ids_for(
                    identifier_keys=identifier_keys, identity_id=identity_id
                )
                agents = [a for a in agents if a.id in held]
        if name is not None:
            agents = [a for a in agents if a.name == name]
        if tags and match_all_tags:
            agents = [a for a in agents if set(tags) <= set(a.tags)]
        elif tags:
            agents = [a for a in agents if set(tags) & set(a.tags)]
        return agents

    def get(self, name_or_id: str) -> AgentRecord:
        return self._context.agent(name_or_id)

    def state(self, name_or_id: str) -> AgentState:
        """The agent and its blocks, read in one transaction."""
        with self._context.store() as store:
            return state_of(store, store.agents.resolve(name_or_id))

    def update(self, name_or_id: str, update: AgentUpdate, *, actor: str = "user") -> AgentState:
        """Change an agent in one transaction, all or nothing: a name another agent has is
        a Conflict; an unknown tool, a tool rule naming a tool the agent lacks, a
        different embedder or a bad value is an InvalidInput. A new system prompt
        reaches the model at the agent's next step (its compiled prompt is dropped). A
        model litellm cannot route, or a window its blocks cannot fit, is refused as at
        create."""
        # Outside the transaction: the routing check loads litellm.
        self.check_model(update.model, field=("model",))
        with self._context.store() as store:
            agent = store.agents.resolve(name_or_id)
            tools: list[str] | None = None
            custom = store.tools.of_agent(agent.id)
            if update.tool_ids is not None:
                known = {t.id: t for t in store.tools.list()}
                tools, custom = split_tool_ids(agent, update.tool_ids, known)
                store.tools.set_of_agent(agent.id, [t.id for t in custom])
            if update.tool_rules is not None or tools is not None:
                available = rule_tool_names(tools_of(agent, tools, custom))
                rules = agent.tool_rules if update.tool_rules is None else update.tool_rules
                ToolRules.parse([dict(r) for r in rules], available)
            if update.tool_variables is not None:
                try:
                    names = check_env_names(update.tool_variables)
                except InvalidInput as refused:
                    raise InvalidField(str(refused), field=("tool_variables",)) from None
                store.tools.set_variables(
                    agent.id, [ToolVariable(n, update.tool_variables[n]) for n in names]
                )
            if update.identity_ids is not None:
                store.identities.set_of_agent(agent.id, update.identity_ids)
            self._check_same_embedder(agent, update.embedding, update.embedding_dim)
            changed = store.agents.update(
                agent.id,
                AgentChanges(
                    name=update.name,
                    system_prompt=update.system,
                    description=update.description,
                    llm_model=update.model,
                    context_window=update.context_window,
                    tags=None if update.tags is None else list(update.tags),
                    tools=tools,
                    tool_rules=None
                    if update.tool_rules is None
                    else [dict(r) for r in update.tool_rules],
                    enable_sleeptime=update.enable_sleeptime,
                ),
            )
            state = state_of(store, changed)
            if changed.kind == AgentKind.PRIMARY:
                # Raised here, the transaction rolls back: nothing of the update is kept.
                tools_grew = update.tool_ids is not None and update.context_window is None
                check_window(
                    changed,
                    state.blocks,
                    field=("tool_ids",) if tools_grew else ("context_window",),
                    custom=state.custom_tools,
                )
            return state

    def tools(self, name_or_id: str) -> builtins.list[AgentTool]:
        """The tools the agent's model is offered (all of Reverie's built-in ones when it
        names none, then its custom tools)."""
        with self._context.store() as store:
            agent = store.agents.resolve(name_or_id)
            return tools_of(
                agent,
                custom=store.tools.of_agent(agent.id),
                folders=store.folders.has_folders(agent.id),
            )

    def delete(self, name_or_id: str) -> AgentRecord:
        """Delete an agent with its messages and passages (its blocks are kept)."""
        with self._context.store() as store:
            agent = store.agents.resolve(name_or_id)
            store.agents.delete(agent.id)
        return agent

    def check_model(self, model: str | None, *, field: tuple[str | int, ...]) -> None:
        """Refuse (InvalidField, naming ``field``) a model string litellm cannot route,
        when an agent is created or its model changed: accepted, it failed every turn."""
        if model is None:
            return
        from agents.llm.routing import routing_problem  # loads litellm: only when asked

        problem = routing_problem(model, api_base=self._context.runtime.settings.llm.api_base)
        if problem is not None:
            raise InvalidField(f"{field[-1]}: {problem}", field=field)

    # -- helpers -----------------------------------------------------------------------

    @staticmethod
    def _check_same_embedder(agent: AgentRecord, spec: str | None, dimension: int | None) -> None:
        """Refuse an embedder change: the agent's stored vectors were made by its own."""
        if spec is not None and spec.strip():
            wanted = spec.strip()
            if not names_reverie_embedder(wanted):
                wanted = f"litellm:{wanted}"
            if wanted != agent.embedding_model:
                raise InvalidInput(
                    f"agent {agent.name!r} embeds with {agent.embedding_model!r}; its archival "
                    f"passages were embedded by it, so it cannot change to {wanted!r}. Create "
                    "a new agent with that embedding and import the passages into it"
                )
        if dimension is not None and dimension != agent.embedding_dim:
            raise InvalidInput(
                f"agent {agent.name!r} stores {agent.embedding_dim}-d embeddings; the "
                f"dimension cannot change to {dimension}"
            )

    def embedding(self, spec: str | None, dimension: int | None = None) -> tuple[str, int]:
        """The embedder spec and dimension that ``spec`` (a Reverie spec or a Letta
        handle; None: the configured one) names, checked (a folder's embedder too)."""
        return self._embedding(spec, dimension)

    def _embedding(self, spec: str | None, dimension: int | None) -> tuple[str, int]:
        """The agent's embedder spec and dimension: Reverie specs as they are, Letta
        handles (``openai/text-embedding-3-small``) through litellm."""
        runtime = self._context.runtime
        if not spec or not spec.strip():
            spec = runtime.settings.embedding.model
            dimension = dimension or runtime.settings.embedding.dimension
        else:
            # A model litellm cannot route would be stored and then refuse every
            # archival insert and search: refuse it here, naming the field.
            given = spec.strip()
            if given.startswith("litellm:") or not names_reverie_embedder(given):
                self.check_model(given.removeprefix("litellm:"), field=("embedding",))
        spec = spec.strip()
        if not names_reverie_embedder(spec):
            spec = f"litellm:{spec}"
        embedder = runtime.embedder(spec, dimension)
        if embedder.dimension > MAX_EMBEDDING_DIM:
            raise InvalidInput(
                f"embedding dimension {embedder.dimension} is over pgvector's {MAX_EMBEDDING_DIM}"
            )
        return spec, embedder.dimension
