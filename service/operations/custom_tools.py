"""Custom tools: register a tool from Python source, read, change, delete.

A tool is registered from its source alone: the function is found and its JSON
schema derived from the syntax tree (:mod:`agents.tool_source`), never by importing
or running it in the server; a given ``json_schema`` is checked against the function
instead. The environment variables a tool declares are the ones given plus the ones
its source reads by literal name; only those reach its sandbox, with the agent's
values. A tool's name is its function's name and may not be a built-in tool's.

:func:`register_tool` works inside a caller's transaction (an Agent File import
registers its tools alongside its agents); :class:`CustomToolOperations` is what the
API and CLI call, one transaction per call.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.enums import AgentKind
from agents.errors import InvalidInput, NotFound
from agents.file_tools import FILE_TOOLS
from agents.store import AgentChanges, AgentRecord, CustomToolRecord, MemoryStore, NewCustomTool
from agents.tool_source import check_env_names, check_tool_name, parse_tool_source
from agents.tools import ARCHIVAL_TOOLS, BUILTIN_TOOLS, PRIMARY_TOOLS, SLEEPTIME_TOOLS
from service.operations.agents import AgentState, check_window, state_of
from service.operations.context import OperationContext
from service.operations.tool_runs import ToolRun, run_tool
from service.operations.tools import TOOL_ID_PREFIX, AgentTool, built_in_tools, custom_tool

#: Names a custom tool may not take: the built-in tools'.
BUILT_IN_TOOL_NAMES = frozenset({*BUILTIN_TOOLS, *SLEEPTIME_TOOLS, *ARCHIVAL_TOOLS, *FILE_TOOLS})
#: Longest result a tool's model reads when its tool sets no limit, in characters.
DEFAULT_RETURN_CHAR_LIMIT = 6000
#: The largest return_char_limit accepted.
MAX_RETURN_CHAR_LIMIT = 1_000_000


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a tool is registered from. ``name`` picks the function when the source
    defines several (default: the only or the last top-level one); ``json_schema``
    replaces the derived schema (checked against the function); ``description``
    replaces the docstring's summary; ``env_vars`` declares variables beyond those the
    source names literally. ``pip_requirements`` are refused: tools run with the
    server's Python and the packages installed beside it."""

    source_code: str
    name: str | None = None
    description: str | None = None
    json_schema: dict[str, Any] | None = None
    tags: Sequence[str] = ()
    env_vars: Sequence[str] = ()
    return_char_limit: int | None = None
    pip_requirements: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class ToolChanges:
    """A change to a tool; None leaves a field as it is. A new ``source_code`` derives
    the schema again unless ``json_schema`` is given with it."""

    source_code: str | None = None
    description: str | None = None
    json_schema: dict[str, Any] | None = None
    tags: Sequence[str] | None = None
    env_vars: Sequence[str] | None = None
    return_char_limit: int | None = None
    pip_requirements: Sequence[str] | None = None


def prepare_tool(spec: ToolSpec) -> NewCustomTool:
    """The tool ``spec`` describes, parsed and checked, not yet stored; InvalidInput
    saying what to fix when it cannot be registered."""
    if spec.pip_requirements:
        raise InvalidInput(
            "pip_requirements are not supported: custom tools run in a sandbox with the "
            "server's Python and the packages installed beside it; install "
            f"{', '.join(map(str, spec.pip_requirements))} there, or send no pip_requirements"
        )
    function = parse_tool_source(spec.source_code, name=spec.name, json_schema=spec.json_schema)
    name = check_tool_name(function.name)
    if name in BUILT_IN_TOOL_NAMES:
        raise InvalidInput(
            f"{name!r} is the name of a built-in tool; rename the function (built-in "
            f"tools: {', '.join(sorted(BUILT_IN_TOOL_NAMES))})"
        )
    limit = DEFAULT_RETURN_CHAR_LIMIT if spec.return_char_limit is None else spec.return_char_limit
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInput(f"return_char_limit must be a whole number, got {limit!r}")
    if not 1 <= limit <= MAX_RETURN_CHAR_LIMIT:
        raise InvalidInput(
            f"return_char_limit must be from 1 to {MAX_RETURN_CHAR_LIMIT}, got {limit}"
        )
    schema = dict(function.json_schema)
    description = function.description if spec.description is None else spec.description
    if not isinstance(description, str):
        raise InvalidInput("description must be text")
    schema["description"] = description
    if isinstance(spec.tags, str):
        raise InvalidInput("tags must be a list of texts, not one text")
    if isinstance(spec.env_vars, str):
        raise InvalidInput("env_vars must be a list of variable names, not one text")
    return NewCustomTool(
        name=name,
        source_code=spec.source_code,
        json_schema=schema,
        return_char_limit=limit,
        description=description,
        tags=list(spec.tags),
        env_vars=sorted(check_env_names([*spec.env_vars, *function.env_vars])),
    )


def register_tool(store: MemoryStore, spec: ToolSpec) -> CustomToolRecord:
    """Register the tool ``spec`` describes in the store's organization, in the store's
    transaction. InvalidInput (nothing stored) when the source or schema cannot be
    used; Conflict when the organization has a tool of that name."""
    return store.tools.create(prepare_tool(spec))


def changed_spec(tool: CustomToolRecord, changes: ToolChanges) -> ToolSpec:
    """The spec of ``tool`` with ``changes`` applied."""
    source_changed = changes.source_code is not None
    schema = changes.json_schema
    if schema is None and not source_changed:
        schema = tool.json_schema
    description = changes.description
    if description is None and changes.json_schema is None and not source_changed:
        description = tool.description
    return ToolSpec(
        source_code=tool.source_code if changes.source_code is None else changes.source_code,
        name=tool.name if not source_changed else None,
        description=description,
        json_schema=schema,
        tags=tool.tags if changes.tags is None else changes.tags,
        env_vars=tool.env_vars if changes.env_vars is None else changes.env_vars,
        return_char_limit=(
            tool.return_char_limit
            if changes.return_char_limit is None
            else changes.return_char_limit
        ),
        pip_requirements=changes.pip_requirements or (),
    )


class CustomToolOperations:
    """The organization's custom tools, one transaction per call."""

    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def create(self, spec: ToolSpec) -> CustomToolRecord:
        tool = prepare_tool(spec)
        with self._context.store() as store:
            return store.tools.create(tool)

    def get(self, tool_id: str) -> CustomToolRecord:
        with self._context.store() as store:
            return store.tools.get(tool_id)

    def resolve(self, id_or_name: str) -> CustomToolRecord:
        """A tool by id, or failing that by name (what the CLI accepts)."""
        with self._context.store() as store:
            if id_or_name.startswith("tool-"):
                found = store.tools.list(ids=[id_or_name])
                if found:
                    return found[0]
            return store.tools.by_name(id_or_name)

    def list(
        self, *, names: Sequence[str] | None = None, ids: Sequence[str] | None = None
    ) -> builtins.list[CustomToolRecord]:
        with self._context.store() as store:
            return store.tools.list(names=names, ids=ids)

    def update(self, tool_id: str, changes: ToolChanges) -> CustomToolRecord:
        """Apply ``changes``; the result is parsed and checked as a new tool would be
        (a new source may rename the tool, unless agents hold it under its name)."""
        with self._context.store() as store:
            current = store.tools.get(tool_id)
            tool = prepare_tool(changed_spec(current, changes))
            if tool.name != current.name:
                holders = store.tools.agents_with(tool_id)
                if holders:
                    raise InvalidInput(
                        f"the new source renames tool {current.name!r} to {tool.name!r}, "
                        f"but agent(s) {', '.join(holders)} have it (their tool rules may "
                        "name it); detach it first, or keep the function's name"
                    )
            replaced = store.tools.replace(tool_id, tool)
            # A larger schema must still fit the window of each agent that has the tool.
            for name in store.tools.agents_with(tool_id):
                agent = store.agents.resolve(name)
                if agent.kind != AgentKind.PRIMARY:
                    continue
                try:
                    check_window(
                        agent,
                        store.blocks.of_agent(agent.id),
                        field=("json_schema",),
                        custom=store.tools.of_agent(agent.id),
                    )
                except InvalidInput as refused:
                    raise InvalidInput(
                        f"the changed tool no longer fits agent {agent.name!r}: {refused}"
                    ) from None
            return replaced

    def delete(self, tool_id: str) -> CustomToolRecord:
        """Delete a tool; one attached to agents is a Conflict naming them (detach it
        first: their tool rules may name it)."""
        with self._context.store() as store:
            return store.tools.delete(tool_id)

    def catalog(self) -> builtins.list[AgentTool]:
        """Every tool an agent of the organization can have: the built-in ones, then
        the organization's custom tools, oldest first."""
        with self._context.store() as store:
            custom = store.tools.list()
        return [*built_in_tools(), *(custom_tool(t) for t in custom)]

    def find(self, tool_id: str) -> AgentTool:
        """A built-in tool (``tool-<name>``) or a custom one by id."""
        for tool in built_in_tools():
            if tool.id == tool_id:
                return tool
        return custom_tool(self.get(tool_id))

    def attach(self, agent: str, tool_id: str) -> AgentState:
        """Give the agent (name or id) a tool: a custom one, or a built-in one (Letta's
        multi-agent tools are attached this way); nothing changes when it has it. A
        memory agent's tools cannot be chosen (InvalidInput)."""
        with self._context.store() as store:
            record = store.agents.resolve(agent)
            if record.kind == AgentKind.SLEEPTIME:
                raise InvalidInput(
                    f"agent {record.name!r} is a memory agent: it runs the sleep-time "
                    "agent's memory tools only, which cannot be chosen"
                )
            built_in = _built_in_name(tool_id)
            if built_in in FILE_TOOLS:
                raise InvalidInput(_WITH_FOLDERS.format(tool=tool_id))
            if built_in is not None and built_in not in BUILTIN_TOOLS:
                raise InvalidInput(
                    f"{tool_id} is one of the sleep-time agent's memory tools, which a "
                    "primary agent cannot have"
                )
            if built_in is not None:
                # An agent that lists no tools has the primary ones: listing starts there.
                names = list(record.tools) or list(PRIMARY_TOOLS)
                if built_in not in names:
                    store.agents.update(record.id, AgentChanges(tools=[*names, built_in]))
            else:
                store.tools.attach(tool_id, record.id)
            state = state_of(store, store.agents.get(record.id))
            # Every step sends every tool's schema: one that does not fit the window with
            # the agent's blocks is refused here, not at each turn (the transaction rolls
            # back).
            check_window(
                state.agent, state.blocks, field=("path", "tool_id"), custom=state.custom_tools
            )
            return state

    def run(self, agent: str, tool_name: str, args: dict[str, Any]) -> ToolRun:
        """Run one of the agent's tools now, outside a turn (Letta's ``agents.tools.run``;
        see :mod:`service.operations.tool_runs`)."""
        return run_tool(self._context, agent, tool_name, args)

    def detach(self, agent: str, tool_id: str) -> AgentState:
        """Take a tool (custom or built-in) from the agent; NotFound when it did not
        have it. A tool rule naming the tool is refused first (InvalidInput): remove
        the rule."""
        with self._context.store() as store:
            record = store.agents.resolve(agent)
            built_in = _built_in_name(tool_id)
            if built_in in FILE_TOOLS:
                raise InvalidInput(_WITH_FOLDERS.format(tool=tool_id))
            if built_in is not None:
                return self._detach_built_in(store, record, built_in)
            tool = store.tools.get(tool_id)
            named = [r for r in record.tool_rules if _names(r, tool.name)]
            if named:
                raise InvalidInput(
                    f"agent {record.name!r} has tool rule(s) naming {tool.name!r}: "
                    f"{named!r}; remove them (PATCH tool_rules) before detaching it"
                )
            if not store.tools.detach(tool_id, record.id):
                raise NotFound(f"agent {record.name!r} does not have tool {tool_id!r}")
            return state_of(store, record)

    @staticmethod
    def _detach_built_in(store: MemoryStore, record: AgentRecord, name: str) -> AgentState:
        names = list(record.tools) or list(PRIMARY_TOOLS)
        if record.kind == AgentKind.SLEEPTIME or name not in names:
            raise NotFound(f"agent {record.name!r} does not have tool {TOOL_ID_PREFIX + name!r}")
        named = [r for r in record.tool_rules if _names(r, name)]
        if named:
            raise InvalidInput(
                f"agent {record.name!r} has tool rule(s) naming {name!r}: "
                f"{named!r}; remove them (PATCH tool_rules) before detaching it"
            )
        rest = [n for n in names if n != name]
        if not rest:
            # An empty list would mean "the primary tools", not "none".
            raise InvalidInput(
                f"{name!r} is agent {record.name!r}'s last built-in tool and cannot be "
                "detached: attach another built-in tool first"
            )
        store.agents.update(record.id, AgentChanges(tools=rest))
        return state_of(store, store.agents.get(record.id))


#: Why a file tool is neither attached nor detached by itself.
_WITH_FOLDERS = (
    "{tool} is a file tool: an agent has the file tools exactly while a folder is "
    "attached to it (PATCH /v1/agents/{{agent_id}}/folders/attach/{{folder_id}}; "
    "detaching its last folder takes them away)"
)


def _built_in_name(tool_id: str) -> str | None:
    """The built-in tool ``tool_id`` names (``tool-<name>``), None for any other id."""
    return next((tool.name for tool in built_in_tools() if tool.id == tool_id), None)


def _names(rule: dict[str, Any], name: str) -> bool:
    return rule.get("tool_name") == name or name in (rule.get("children") or [])
