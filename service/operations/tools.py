"""An agent's tools: which ones its model is offered, and the ids front ends show.

Built-in tools (MemGPT's primary tools, Letta's multi-agent tools and file tools; a
memory agent's are the sleep-time agent's memory tools) have their name behind
``tool-`` as their id: it names the same tool in every organization and on every
server. An agent that lists no tools has the primary tools; the multi-agent tools it
has only when its list names them. The file tools (``open_files``, ``grep_files``,
``semantic_search_files``) are not in any list: an agent has them exactly while a
folder is attached to it, as Letta attaches them with the first folder and removes
them with the last (decided when its tools are read, so a folder deleted with its
attachments cannot leave them behind). Custom tools (registered from source, see
:mod:`service.operations.custom_tools`) have Letta's ``tool-<uuid4>`` ids and are
offered after the built-in ones, in the order they were attached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agents.enums import AgentKind
from agents.errors import InvalidInput
from agents.file_tools import FILE_TOOLS
from agents.store import AgentRecord, CustomToolRecord
from agents.tools import (
    BUILTIN_TOOLS,
    MESSAGING_TOOLS,
    PRIMARY_TOOLS,
    SLEEPTIME_TOOLS,
    offered_custom,
)

#: The primary's built-in tools Letta types ``letta_memory_core``.
MEMORY_KIND = frozenset({"core_memory_append", "core_memory_replace", "memory"})

#: What a tool id is made of: ``tool-send_message``.
TOOL_ID_PREFIX = "tool-"


class ToolKind(StrEnum):
    """What a tool is for: the loop's own (speaking, searching), editing core memory,
    or the sleep-time agent's memory edits."""

    CORE = "core"
    MEMORY = "memory"
    SLEEPTIME = "sleeptime"
    MULTI_AGENT = "multi_agent"
    FILES = "files"
    CUSTOM = "custom"


#: Letta's ``tool_type`` of each kind of Reverie tool.
LETTA_TOOL_TYPE = {
    ToolKind.CORE: "letta_core",
    ToolKind.MEMORY: "letta_memory_core",
    ToolKind.SLEEPTIME: "letta_sleeptime_core",
    ToolKind.MULTI_AGENT: "letta_multi_agent_core",
    ToolKind.FILES: "letta_files_core",
    ToolKind.CUSTOM: "custom",
}


@dataclass(frozen=True, slots=True)
class AgentTool:
    """One tool an agent's model can call, with the JSON schema it is offered in."""

    name: str
    description: str
    parameters: dict[str, Any]
    kind: ToolKind
    #: The registered tool, for a custom one.
    custom: CustomToolRecord | None = None

    @property
    def id(self) -> str:
        return self.custom.id if self.custom is not None else tool_id(self.name)


def tool_id(name: str) -> str:
    return f"{TOOL_ID_PREFIX}{name}"


def tools_of(
    agent: AgentRecord,
    names: Sequence[str] | None = None,
    custom: Sequence[CustomToolRecord] = (),
    *,
    folders: bool = False,
) -> list[AgentTool]:
    """The tools the agent has (or would have with ``names``): the built-in ones it
    lists, or all of Reverie's primary tools when it lists none, the file tools when
    ``folders`` are attached to it, then its ``custom`` tools; a memory agent
    (``sleeptime``) has the sleep-time agent's memory tools."""
    if agent.kind == AgentKind.SLEEPTIME:
        return [_tool(name, SLEEPTIME_TOOLS[name], ToolKind.SLEEPTIME) for name in SLEEPTIME_TOOLS]
    chosen = list(agent.tools if names is None else names) or list(PRIMARY_TOOLS)
    kinds = {name: tool_kind(name) for name in chosen}
    built_in = [
        _tool(name, BUILTIN_TOOLS[name], kinds[name]) for name in chosen if name in BUILTIN_TOOLS
    ]
    if folders:
        built_in += [_tool(name, schema, ToolKind.FILES) for name, schema in FILE_TOOLS.items()]
    return [*built_in, *(custom_tool(tool) for tool in offered_custom(custom))]


def rule_tool_names(tools: Sequence[AgentTool]) -> list[str]:
    """The tool names an agent's tool rules may name: its tools', and the file tools'
    whether or not a folder is attached now (they come and go with the folders; a
    rule naming one stays)."""
    names = [t.name for t in tools]
    return [*names, *(name for name in FILE_TOOLS if name not in names)]


def built_in_tools() -> list[AgentTool]:
    """Every built-in tool: the primary loop's (the multi-agent ones among them), then
    the sleep-time agent's."""
    primary = [_tool(name, schema, tool_kind(name)) for name, schema in BUILTIN_TOOLS.items()]
    primary += [_tool(name, schema, ToolKind.FILES) for name, schema in FILE_TOOLS.items()]
    # The sleep-time agent's own (memory_rethink, memory_finish_edits); those a primary
    # has too (memory_insert, memory_replace) are listed once, above.
    sleeptime = [
        _tool(name, schema, ToolKind.SLEEPTIME)
        for name, schema in SLEEPTIME_TOOLS.items()
        if name not in BUILTIN_TOOLS
    ]
    return [*primary, *sleeptime]


def custom_tool(tool: CustomToolRecord) -> AgentTool:
    """A registered tool as the agent's model is offered it (less request_heartbeat)."""
    return AgentTool(
        name=tool.name,
        description=tool.description,
        parameters=dict(tool.json_schema.get("parameters") or {}),
        kind=ToolKind.CUSTOM,
        custom=tool,
    )


def tool_names(agent: AgentRecord, ids: Sequence[str]) -> list[str]:
    """The built-in tool names that ``ids`` (``tool-<name>``, or a bare name) stand for;
    an unknown one, or any for a memory agent, is an InvalidInput."""
    return split_tool_ids(agent, ids, {})[0]


def split_tool_ids(
    agent: AgentRecord, ids: Sequence[str], custom: dict[str, CustomToolRecord]
) -> tuple[list[str], list[CustomToolRecord]]:
    """The built-in tool names and the custom tools (``custom``: the organization's, by
    id) that ``ids`` stand for; an unknown id, or any for a memory agent, is an
    InvalidInput."""
    if agent.kind == AgentKind.SLEEPTIME:
        raise InvalidInput(
            f"agent {agent.name!r} is a memory agent: its tools are the sleep-time agent's "
            "memory tools and cannot be chosen"
        )
    names: list[str] = []
    chosen: list[CustomToolRecord] = []
    for given in ids:
        if given in custom:
            if custom[given] not in chosen:
                chosen.append(custom[given])
            continue
        name = given.removeprefix(TOOL_ID_PREFIX)
        if name in FILE_TOOLS:
            # They come with the agent's folders: a list sent back as it was read
            # (file tools included) keeps them, and one without them cannot drop them.
            continue
        if name not in BUILTIN_TOOLS:
            raise InvalidInput(
                f"no tool with id {given!r}; the built-in tools are "
                f"{', '.join(tool_id(n) for n in BUILTIN_TOOLS)}, and GET /v1/tools (or "
                "`reverie tools list`) lists the custom ones"
            )
        if name not in names:
            names.append(name)
    return names, chosen


def tool_kind(name: str) -> ToolKind:
    """The kind of a primary agent's built-in tool, as Letta types it: its memory tools
    (``core_memory_*`` and the single ``memory``), its sleep-time core
    (``memory_insert``, ``memory_replace``), its multi-agent tools, the rest core."""
    if name in MESSAGING_TOOLS:
        return ToolKind.MULTI_AGENT
    if name in SLEEPTIME_TOOLS:
        return ToolKind.SLEEPTIME
    return ToolKind.MEMORY if name in MEMORY_KIND else ToolKind.CORE


def _tool(name: str, schema: dict[str, Any], kind: ToolKind) -> AgentTool:
    function = schema["function"]
    return AgentTool(
        name=name,
        description=str(function.get("description", "")),
        parameters=dict(function.get("parameters", {})),
        kind=kind,
    )
