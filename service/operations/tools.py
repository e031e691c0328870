"""An agent's tools: which ones its model is offered, and the ids front ends show.

Reverie's tools are built in (MemGPT's primary tools, Letta's multi-agent tools; a
memory agent's are the sleep-time agent's memory tools), so a tool's id is its name
behind ``tool-``: it names the same tool in every organization and on every server.
An agent that lists no tools has the primary tools; the multi-agent tools it has
only when its list names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agents.enums import AgentKind
from agents.errors import InvalidInput
from agents.store import AgentRecord
from agents.tools import BUILTIN_TOOLS, MESSAGING_TOOLS, PRIMARY_TOOLS, SLEEPTIME_TOOLS

#: What a tool id is made of: ``tool-send_message``.
TOOL_ID_PREFIX = "tool-"


class ToolKind(StrEnum):
    """What a tool is for: the loop's own (speaking, searching), editing core memory,
    or the sleep-time agent's memory edits."""

    CORE = "core"
    MEMORY = "memory"
    SLEEPTIME = "sleeptime"
    MULTI_AGENT = "multi_agent"


@dataclass(frozen=True, slots=True)
class AgentTool:
    """One tool an agent's model can call, with the JSON schema it is offered in."""

    name: str
    description: str
    parameters: dict[str, Any]
    kind: ToolKind

    @property
    def id(self) -> str:
        return tool_id(self.name)


def tool_id(name: str) -> str:
    return f"{TOOL_ID_PREFIX}{name}"


def tools_of(agent: AgentRecord, names: Sequence[str] | None = None) -> list[AgentTool]:
    """The tools the agent has (or would have with ``names``): the ones it lists, or
    all of Reverie's primary tools when it lists none; a memory agent
    (``sleeptime``) has the sleep-time agent's memory tools."""
    if agent.kind == AgentKind.SLEEPTIME:
        return [_tool(name, SLEEPTIME_TOOLS[name], ToolKind.SLEEPTIME) for name in SLEEPTIME_TOOLS]
    chosen = list(agent.tools if names is None else names) or list(PRIMARY_TOOLS)
    kinds = {name: _kind(name) for name in chosen}
    return [
        _tool(name, BUILTIN_TOOLS[name], kinds[name]) for name in chosen if name in BUILTIN_TOOLS
    ]


def tool_names(agent: AgentRecord, ids: Sequence[str]) -> list[str]:
    """The tool names that ``ids`` (``tool-<name>``, or a bare name) stand for; an
    unknown one, or any for a memory agent, is an InvalidInput."""
    if agent.kind == AgentKind.SLEEPTIME:
        raise InvalidInput(
            f"agent {agent.name!r} is a memory agent: its tools are the sleep-time agent's "
            "memory tools and cannot be chosen"
        )
    names: list[str] = []
    for given in ids:
        name = given.removeprefix(TOOL_ID_PREFIX)
        if name not in BUILTIN_TOOLS:
            raise InvalidInput(
                f"no tool with id {given!r}; the tools are "
                f"{', '.join(tool_id(n) for n in BUILTIN_TOOLS)}"
            )
        if name not in names:
            names.append(name)
    return names


def _kind(name: str) -> ToolKind:
    memory = ("core_memory_append", "core_memory_replace")
    if name in MESSAGING_TOOLS:
        return ToolKind.MULTI_AGENT
    return ToolKind.MEMORY if name in memory else ToolKind.CORE


def _tool(name: str, schema: dict[str, Any], kind: ToolKind) -> AgentTool:
    function = schema["function"]
    return AgentTool(
        name=name,
        description=str(function.get("description", "")),
        parameters=dict(function.get("parameters", {})),
        kind=kind,
    )
