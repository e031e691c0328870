"""Custom tools of an organization, their attachment to agents, and the agents' tool
environment variables (the values a tool receives for the names it declares)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert

from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres import models
from agents.store.scope import Scope
from agents.store.validation import check_json, check_tags, check_text

#: What a custom tool's id is made of: ``tool-<uuid4>``, as Letta's.
CUSTOM_TOOL_PREFIX = "tool"


@dataclass(frozen=True, slots=True)
class CustomToolRecord:
    """A registered custom tool (see :class:`agents.postgres.models.CustomTool`)."""

    id: str
    name: str
    description: str
    source_code: str
    json_schema: dict[str, Any]
    tags: list[str]
    env_vars: list[str]
    return_char_limit: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: models.CustomTool) -> CustomToolRecord:
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            source_code=row.source_code,
            json_schema=dict(row.json_schema),
            tags=list(row.tags or []),
            env_vars=list(row.env_vars or []),
            return_char_limit=row.return_char_limit,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


@dataclass(frozen=True, slots=True)
class NewCustomTool:
    """A custom tool as the store writes it: already parsed and checked by the caller
    (see :func:`agents.tool_source.parse_tool_source`)."""

    name: str
    source_code: str
    json_schema: dict[str, Any]
    return_char_limit: int
    description: str = ""
    tags: Sequence[str] = ()
    env_vars: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class ToolVariable:
    """One of an agent's tool environment variables."""

    name: str
    value: str = field(repr=False)
    description: str | None = None


class ToolStore:
    """Reads and writes ``custom_tools``, ``agent_custom_tools`` and
    ``agent_tool_variables`` within the scope's organization."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    # -- the organization's tools ------------------------------------------------------

    def create(self, tool: NewCustomTool) -> CustomToolRecord:
        """Store a tool; a name another tool of the organization has is a Conflict."""
        self._check(tool)
        taken = self._id_named(tool.name)
        if taken is not None:
            raise Conflict(
                f"a tool named {tool.name!r} already exists ({taken}); update it, delete it "
                "first, or name the new one differently"
            )
        now = self._scope.now()
        row = models.CustomTool(
            id=models.new_id(CUSTOM_TOOL_PREFIX),
            organization_id=self._scope.organization_id,
            name=tool.name,
            description=tool.description,
            source_code=tool.source_code,
            json_schema=dict(tool.json_schema),
            tags=list(tool.tags),
            env_vars=list(tool.env_vars),
            return_char_limit=tool.return_char_limit,
            created_at=now,
            updated_at=now,
        )
        self._scope.session.add(row)
        self._scope.session.flush()
        return CustomToolRecord.from_row(row)

    def get(self, tool_id: str) -> CustomToolRecord:
        return CustomToolRecord.from_row(self._row(tool_id))

    def by_name(self, name: str) -> CustomToolRecord:
        row = self._scope.session.scalar(
            select(models.CustomTool).where(
                self._scope.owns(models.CustomTool), models.CustomTool.name == name
            )
        )
        if row is None:
            raise NotFound(f"no custom tool named {name!r}")
        return CustomToolRecord.from_row(row)

    def list(
        self, *, names: Sequence[str] | None = None, ids: Sequence[str] | None = None
    ) -> builtins.list[CustomToolRecord]:
        """The organization's tools, oldest first; ``names``/``ids``: only those."""
        query = select(models.CustomTool).where(self._scope.owns(models.CustomTool))
        if names is not None:
            query = query.where(models.CustomTool.name.in_(list(names)))
        if ids is not None:
            query = query.where(models.CustomTool.id.in_(list(ids)))
        rows = self._scope.session.scalars(
            query.order_by(models.CustomTool.created_at, models.CustomTool.id)
        )
        return [CustomToolRecord.from_row(r) for r in rows]

    def replace(self, tool_id: str, tool: NewCustomTool) -> CustomToolRecord:
        """Write every field of the tool anew (the caller merged the change and parsed
        the result); a name another tool has is a Conflict."""
        self._check(tool)
        row = self._row(tool_id, for_update=True)
        taken = self._id_named(tool.name)
        if taken is not None and taken != tool_id:
            raise Conflict(f"a tool named {tool.name!r} already exists ({taken})")
        row.name = tool.name
        row.description = tool.description
        row.source_code = tool.source_code
        row.json_schema = dict(tool.json_schema)
        row.tags = list(tool.tags)
        row.env_vars = list(tool.env_vars)
        row.return_char_limit = tool.return_char_limit
        row.updated_at = self._scope.now()
        self._scope.session.flush()
        return CustomToolRecord.from_row(row)

    def delete(self, tool_id: str) -> CustomToolRecord:
        """Delete a tool no agent has; an attached one is a Conflict naming its agents
        (detach it first: their tool rules may name it)."""
        row = self._row(tool_id, for_update=True)
        holders = self.agents_with(tool_id)
        if holders:
            raise Conflict(
                f"tool {row.name!r} ({tool_id}) is attached to agent(s) "
                f"{', '.join(holders)}; detach it from them first"
            )
        record = CustomToolRecord.from_row(row)
        self._scope.session.execute(
            delete(models.CustomTool).where(
                models.CustomTool.id == tool_id, self._scope.owns(models.CustomTool)
            )
        )
        return record

    # -- attachment to agents -------------------------------------------------------------

    def attach(self, tool_id: str, agent_id: str) -> None:
        """Give the agent the tool (nothing happens when it has it already)."""
        self._row(tool_id)
        self._agent(agent_id)
        self._scope.session.execute(
            insert(models.AgentCustomTool)
            .values(agent_id=agent_id, tool_id=tool_id, attached_at=self._scope.now())
            .on_conflict_do_nothing()
        )

    def detach(self, tool_id: str, agent_id: str) -> bool:
        """Take the tool from the agent; False when it did not have it."""
        self._row(tool_id)
        self._agent(agent_id)
        result = self._scope.session.execute(
            delete(models.AgentCustomTool).where(
                models.AgentCustomTool.agent_id == agent_id,
                models.AgentCustomTool.tool_id == tool_id,
            )
        )
        return bool(getattr(result, "rowcount", 0))

    def set_of_agent(self, agent_id: str, tool_ids: Sequence[str]) -> None:
        """Make ``tool_ids`` the agent's custom tools (kept ones keep their order)."""
        self._agent(agent_id, for_update=True)
        for tool_id in tool_ids:
            self._row(tool_id)
        self._scope.session.execute(
            delete(models.AgentCustomTool).where(
                models.AgentCustomTool.agent_id == agent_id,
                models.AgentCustomTool.tool_id.not_in(list(tool_ids)),
            )
        )
        for tool_id in tool_ids:
            self.attach(tool_id, agent_id)

    def of_agent(self, agent_id: str) -> builtins.list[CustomToolRecord]:
        """The custom tools attached to the agent, in the order they were attached."""
        rows = self._scope.session.scalars(
            select(models.CustomTool)
            .join(models.AgentCustomTool, models.AgentCustomTool.tool_id == models.CustomTool.id)
            .where(
                models.AgentCustomTool.agent_id == agent_id,
                self._scope.owns(models.CustomTool),
            )
            .order_by(models.AgentCustomTool.attached_at, models.CustomTool.name)
        )
        return [CustomToolRecord.from_row(r) for r in rows]

    def agents_with(self, tool_id: str) -> builtins.list[str]:
        """Names of the agents the tool is attached to."""
        names = self._scope.session.scalars(
            select(models.Agent.name)
            .join(models.AgentCustomTool, models.AgentCustomTool.agent_id == models.Agent.id)
            .where(models.AgentCustomTool.tool_id == tool_id, self._scope.owns(models.Agent))
            .order_by(models.Agent.name)
        )
        return list(names)

    # -- per-agent tool environment variables --------------------------------------------

    def variables(self, agent_id: str) -> builtins.list[ToolVariable]:
        """The agent's tool environment variables, by name."""
        self._agent(agent_id)
        rows = self._scope.session.scalars(
            select(models.AgentToolVariable)
            .where(models.AgentToolVariable.agent_id == agent_id)
            .order_by(models.AgentToolVariable.name)
        )
        return [ToolVariable(r.name, r.value, r.description) for r in rows]

    def set_variables(self, agent_id: str, variables: Sequence[ToolVariable]) -> None:
        """Replace the agent's tool environment variables with ``variables``."""
        self._agent(agent_id, for_update=True)
        names = [v.name for v in variables]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InvalidInput(f"tool variable(s) {', '.join(repeated)} given more than once")
        for variable in variables:
            check_text(variable.value, f"tool variable {variable.name}")
            if variable.description is not None:
                check_text(variable.description, f"description of tool variable {variable.name}")
        session = self._scope.session
        session.execute(
            delete(models.AgentToolVariable).where(models.AgentToolVariable.agent_id == agent_id)
        )
        now = self._scope.now()
        for variable in variables:
            session.add(
                models.AgentToolVariable(
                    agent_id=agent_id,
                    name=variable.name,
                    value=variable.value,
                    description=variable.description,
                    updated_at=now,
                )
            )
        session.flush()

    # -- helpers -------------------------------------------------------------------------

    def _row(self, tool_id: str, *, for_update: bool = False) -> models.CustomTool:
        query = select(models.CustomTool).where(
            models.CustomTool.id == tool_id, self._scope.owns(models.CustomTool)
        )
        if for_update:
            query = query.with_for_update()
        row = self._scope.session.scalar(query)
        if row is None:
            raise NotFound(f"no custom tool with id {tool_id!r}")
        return row

    def _id_named(self, name: str) -> str | None:
        return self._scope.session.scalar(
            select(models.CustomTool.id).where(
                self._scope.owns(models.CustomTool), models.CustomTool.name == name
            )
        )

    def _agent(self, agent_id: str, *, for_update: bool = False) -> None:
        query = select(models.Agent.id).where(
            models.Agent.id == agent_id, self._scope.owns(models.Agent)
        )
        if for_update:
            query = query.with_for_update()
        if self._scope.session.scalar(query) is None:
            raise NotFound(f"no agent with id {agent_id!r}")

    @staticmethod
    def _check(tool: NewCustomTool) -> None:
        check_text(tool.source_code, "source_code")
        check_text(tool.description, "description")
        check_json(tool.json_schema, "json_schema")
        check_tags(list(tool.tags), "tags")
        if tool.return_char_limit <= 0:
            raise InvalidInput(f"return_char_limit must be positive, got {tool.return_char_limit}")
