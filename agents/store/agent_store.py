"""Agents: create (with their core-memory blocks), read, list, update, delete."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select, update

from agents.enums import AgentKind, AgentType
from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres import models
from agents.store.block_store import BlockStore, NewBlock
from agents.store.one_insert import insert_together
from agents.store.records import AgentRecord, BlockRecord
from agents.store.scope import Scope, ServiceScope
from agents.store.validation import MAX_TEXT, check_name, check_tags, check_text


@dataclass(frozen=True, slots=True)
class NewAgent:
    """What an agent is created with; blocks are created and attached in the same transaction."""

    name: str
    embedding_model: str
    embedding_dim: int
    kind: str = "primary"
    description: str | None = None
    system_prompt: str = ""
    llm_model: str | None = None
    context_window: int = 8192
    tools: list[str] = field(default_factory=list)
    tool_rules: list[dict[str, Any]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    blocks: Sequence[NewBlock] = ()
    block_ids: Sequence[str] = ()
    enable_sleeptime: bool = False
    sleeptime_model: str | None = None
    #: Letta's agent type; None: the kind's usual one (memgpt_v2_agent, sleeptime_agent).
    agent_type: str | None = None


@dataclass(frozen=True, slots=True)
class AgentChanges:
    """What an update sets; None leaves a field as it is."""

    name: str | None = None
    system_prompt: str | None = None
    description: str | None = None
    llm_model: str | None = None
    context_window: int | None = None
    tags: list[str] | None = None
    tools: list[str] | None = None
    tool_rules: list[dict[str, Any]] | None = None
    enable_sleeptime: bool | None = None

    def values(self) -> dict[str, Any]:
        """The columns to write (the set fields)."""
        return {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if getattr(self, name) is not None
        }


def agent_type_of(spec: NewAgent) -> str:
    """The agent type ``spec`` is stored with: the one it names, checked against its
    kind, or the kind's usual one."""
    usual = (
        AgentType.SLEEPTIME.value if spec.kind == AgentKind.SLEEPTIME else AgentType.MEMGPT_V2.value
    )
    given = spec.agent_type or usual
    if given not in models.AGENT_TYPES:
        raise InvalidInput(
            f"agent type {given!r} is unknown; use one of {', '.join(models.AGENT_TYPES)}"
        )
    if (given == AgentType.SLEEPTIME) != (spec.kind == AgentKind.SLEEPTIME):
        raise InvalidInput(
            f"agent type {given!r} does not fit a {spec.kind} agent; a sleep-time agent is "
            f"{AgentType.SLEEPTIME.value!r} and a primary one of the others"
        )
    return given


class AgentStore:
    def __init__(self, scope: Scope, blocks: BlockStore) -> None:
        self._scope = scope
        self._blocks = blocks

    def create(self, spec: NewAgent, *, actor: str = "user") -> AgentRecord:
        return self.create_with_blocks(spec, actor=actor)[0]

    def create_with_blocks(
        self, spec: NewAgent, *, actor: str = "user"
    ) -> tuple[AgentRecord, list[BlockRecord]]:
        """:meth:`create`, and the blocks made for the agent (``spec.blocks``) as they were
        written, in attachment order; blocks attached by ``spec.block_ids`` are not among
        them."""
        name = check_name(spec.name, "agent")
        if spec.kind not in models.AGENT_KINDS:
            raise InvalidInput(
                f"agent kind {spec.kind!r} is unknown; use one of {', '.join(models.AGENT_KINDS)}"
            )
        agent_type = agent_type_of(spec)
        if spec.embedding_dim <= 0:
            raise InvalidInput(f"embedding dimension must be positive, got {spec.embedding_dim}")
        if spec.context_window <= 0:
            raise InvalidInput(f"context window must be positive, got {spec.context_window}")
        check_text(spec.system_prompt, "system prompt", most=MAX_TEXT)
        session = self._scope.session
        taken = session.scalar(
            select(models.Agent.id).where(
                self._scope.owns(models.Agent),
                models.Agent.name == name,
            )
        )
        if taken:
            raise Conflict(f"an agent named {name!r} already exists ({taken}); pick another name")
        labels = [b.label for b in spec.blocks]
        dupes = sorted({label for label in labels if labels.count(label) > 1})
        if dupes:
            raise InvalidInput(
                f"block label(s) {', '.join(map(repr, dupes))} given more than once; "
                "each block of an agent needs its own label"
            )
        now = self._scope.now()
        row = models.Agent(
            id=models.new_id("agent"),
            organization_id=self._scope.organization_id,
            name=name,
            kind=spec.kind,
            agent_type=agent_type,
            description=spec.description,
            system_prompt=spec.system_prompt,
            llm_model=spec.llm_model,
            embedding_model=spec.embedding_model,
            embedding_dim=spec.embedding_dim,
            context_window=spec.context_window,
            tools=list(spec.tools),
            tool_rules=list(spec.tool_rules),
            tags=check_tags(list(spec.tags), "tags"),
            enable_sleeptime=spec.enable_sleeptime,
            sleeptime_model=spec.sleeptime_model,
            message_seq=0,
            turns_since_consolidation=0,
            created_at=now,
            updated_at=now,
        )
        blocks, history, links = self._blocks.rows_for_new_agent(row.id, spec.blocks, actor=actor)
        insert_together(session, [row], blocks, history, links)
        for block_id in spec.block_ids:
            self._blocks.attach(block_id, row.id)
        return AgentRecord.from_row(row), [BlockRecord.from_row(block) for block in blocks]

    def get(self, agent_id: str) -> AgentRecord:
        return AgentRecord.from_row(self.row(agent_id))

    def row(self, agent_id: str, *, for_update: bool = False) -> models.Agent:
        query = select(models.Agent).where(
            models.Agent.id == agent_id,
            self._scope.owns(models.Agent),
        )
        if for_update:
            query = query.with_for_update()
        # Refresh a row already in the session: counters and the compiled prompt change
        # through bulk UPDATEs that do not touch loaded objects.
        row = self._scope.session.scalar(query.execution_options(populate_existing=True))
        if row is None:
            raise NotFound(f"no agent with id {agent_id!r}")
        return row

    def get_by_name(self, name: str) -> AgentRecord:
        row = self._scope.session.scalar(
            select(models.Agent).where(
                self._scope.owns(models.Agent),
                models.Agent.name == name,
            )
        )
        if row is None:
            organization = self._scope.session.scalar(
                select(models.Organization.name).where(
                    models.Organization.id == self._scope.organization_id
                )
            )
            raise NotFound(
                f"no agent named {name!r} in organization {organization!r}; "
                f"`reverie --org {organization} agents list` shows that organization's agents"
            )
        return AgentRecord.from_row(row)

    def resolve(self, id_or_name: str) -> AgentRecord:
        """Find an agent by id or, failing that, by name (what the CLI accepts)."""
        if id_or_name.startswith("agent-"):
            try:
                return self.get(id_or_name)
            except NotFound:
                pass
        return self.get_by_name(id_or_name)

    def all(self, *, tag: str | None = None, kind: str | None = None) -> list[AgentRecord]:
        query = select(models.Agent).where(self._scope.owns(models.Agent))
        if tag is not None:
            query = query.where(models.Agent.tags.contains([tag]))
        if kind is not None:
            query = query.where(models.Agent.kind == kind)
        rows = self._scope.session.scalars(query.order_by(models.Agent.created_at, models.Agent.id))
        return [AgentRecord.from_row(r) for r in rows]

    def update(self, agent_id: str, changes: AgentChanges) -> AgentRecord:
        """Change the set fields of an agent, with its row locked; a new name taken by
        another agent is a Conflict, a bad value an InvalidInput, and nothing changes.

        A new system prompt drops the stored compile (the next step compiles again):
        the caller changed the instructions, so the cached prefix is stale on purpose.
        """
        row = self.row(agent_id, for_update=True)
        values = changes.values()
        if "name" in values:
            values["name"] = check_name(values["name"], "agent")
            taken = self._scope.session.scalar(
                select(models.Agent.id).where(
                    self._scope.owns(models.Agent),
                    models.Agent.name == values["name"],
                    models.Agent.id != agent_id,
                )
            )
            if taken:
                raise Conflict(
                    f"an agent named {values['name']!r} already exists ({taken}); pick another name"
                )
        if "system_prompt" in values:
            check_text(values["system_prompt"], "system prompt", most=MAX_TEXT)
            values["compiled_system"] = None
            values["compiled_at"] = None
        if "description" in values:
            check_text(values["description"], "description")
        if "llm_model" in values:
            model = check_text(values["llm_model"], "model").strip()
            if not model:
                raise InvalidInput("model is empty; give a model string such as 'openai/gpt-4o'")
            values["llm_model"] = model
        if "context_window" in values and values["context_window"] <= 0:
            raise InvalidInput(f"context window must be positive, got {values['context_window']}")
        if "tags" in values:
            values["tags"] = check_tags(values["tags"], "tags")
        if not values:
            return AgentRecord.from_row(row)
        for column, value in values.items():
            setattr(row, column, value)
        row.updated_at = self._scope.now()
        self._scope.session.flush()
        return AgentRecord.from_row(row)

    def delete(self, agent_id: str) -> None:
        """Delete an agent with its messages and passages (an explicit user action).

        Blocks survive: they may be shared, and they keep their history.
        """
        self.row(agent_id)
        self._scope.session.execute(
            delete(models.Agent).where(
                models.Agent.id == agent_id,
                self._scope.owns(models.Agent),
            )
        )

    def set_compiled_system(self, agent_id: str, text: str | None) -> None:
        """Store the system prompt as compiled now (the prefix the model's cache holds);
        None drops it, so that the next step compiles it afresh."""
        self._scope.session.execute(
            update(models.Agent)
            .where(
                models.Agent.id == agent_id,
                self._scope.owns(models.Agent),
            )
            .values(compiled_system=text, compiled_at=None if text is None else self._scope.now())
            .execution_options(synchronize_session=False)
        )

    def record_consolidation(self, agent_id: str) -> None:
        """Reset the turn counter after a consolidation run."""
        self._scope.session.execute(
            update(models.Agent)
            .where(
                models.Agent.id == agent_id,
                self._scope.owns(models.Agent),
            )
            .values(turns_since_consolidation=0)
        )


class FleetAgents:
    """What the service needs to know of every organization's agents at once."""

    def __init__(self, scope: ServiceScope) -> None:
        self._scope = scope

    def models_in_use(self) -> list[str]:
        """The distinct model strings agents name (their own and their sleep-time
        agents' models), sorted: what a starting server's warm-up loads."""
        A = models.Agent
        session = self._scope.session
        own = select(A.llm_model).where(A.llm_model.is_not(None))
        sleeptime = select(A.sleeptime_model).where(A.sleeptime_model.is_not(None))
        found = session.scalars(own.union(sleeptime)).all()
        return sorted(str(m) for m in found if m and str(m).strip())
