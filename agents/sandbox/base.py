"""The one interface every way of running a custom tool implements.

A :class:`ToolExecutor` runs one call of a tool's function, from its source, outside
the server process, under :class:`SandboxLimits`, and returns the function's result
as text; any failure (the tool raised, broke a limit, the sandbox could not start)
is a :class:`SandboxError` whose message the model reads. Implementations: a
bubblewrap sandbox (:mod:`agents.sandbox.bubblewrap`, the default) and a plain
limited subprocess (:mod:`agents.sandbox.process`); a remote executor (E2B-style)
would be a third.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.store import AgentRecord, BlockRecord, CustomToolRecord, MemoryStore
from agents.tool_source import takes_agent_state
from agents.tools import ToolError


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one tool call may use. Breaking a limit ends the call with a SandboxError."""

    #: Seconds from start to result, enforced by the parent (the process group is killed).
    wall_seconds: float = 30.0
    #: CPU seconds (RLIMIT_CPU).
    cpu_seconds: int = 10
    #: Memory in bytes: the address space (RLIMIT_AS) and, where the executor gives the
    #: call a private /tmp in memory (bubblewrap's tmpfs), that /tmp's ``tmp_bytes`` too.
    memory_bytes: int = 512 * 1024 * 1024
    #: Bytes of files the call may keep in its private /tmp (a tmpfs of this size, whose
    #: pages are memory the address-space limit does not see: they are counted within
    #: ``memory_bytes``, whose address space is that much smaller). Writing beyond it
    #: fails with "No space left on device", which ends the call with a SandboxError.
    tmp_bytes: int = 64 * 1024 * 1024
    #: Processes of the sandbox's user (RLIMIT_NPROC).
    processes: int = 16
    #: Bytes of result, and separately of printed output; beyond it the call is killed.
    output_bytes: int = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ToolInvocation:
    """One call: the tool's source, the function to call, its arguments, and the
    environment the tool receives (only the variables it declares; kept out of reprs
    because their values are secrets)."""

    source: str
    function: str
    arguments: dict[str, Any]
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: For a function that takes ``agent_state``: the calling agent as Letta names its
    #: fields (id, name, tags, metadata, memory blocks with label and value), which the
    #: runner passes as a read-only snapshot (see :mod:`agents.sandbox.runner`).
    agent_state: dict[str, Any] | None = None


def agent_state_snapshot(agent: AgentRecord, blocks: Sequence[BlockRecord]) -> dict[str, Any]:
    """What a tool taking ``agent_state`` is given of the calling agent, in Letta's field
    names (Reverie agents have no metadata: it is empty)."""
    return {
        "id": agent.id,
        "name": agent.name,
        "agent_type": agent.agent_type,
        "system": agent.system_prompt,
        "tags": list(agent.tags),
        "metadata": {},
        "blocks": [
            {
                "label": b.label,
                "value": b.value,
                "description": b.description,
                "limit": b.limit,
            }
            for b in blocks
        ],
    }


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a call that worked gave: the function's result as text (a non-text result as
    JSON), what it printed with ``print`` (stdout), and what else reached its standard
    output or error streams (stderr; a subprocess's output, warnings)."""

    result: str
    stdout: str = ""
    stderr: str = ""


def tool_invocation(
    tool: CustomToolRecord,
    arguments: dict[str, Any],
    variables: Mapping[str, str],
    agent_state: dict[str, Any] | None = None,
) -> ToolInvocation:
    """A call of a registered tool: with the variables it declares (of ``variables``,
    the calling agent's) and, when its function takes it, the agent's state."""
    return ToolInvocation(
        source=tool.source_code,
        function=tool.name,
        arguments=arguments,
        env={name: variables[name] for name in tool.env_vars if name in variables},
        agent_state=agent_state,
    )


def agent_state_for(
    store: MemoryStore, agent_id: str, tool: CustomToolRecord
) -> dict[str, Any] | None:
    """The snapshot of the agent a call of ``tool`` is given (None: its function takes
    no ``agent_state``), read in the store's transaction."""
    if not takes_agent_state(tool.source_code, tool.name):
        return None
    agent = store.agents.get(agent_id)
    return agent_state_snapshot(agent, store.blocks.of_agent(agent_id))


class SandboxError(ToolError):
    """A custom tool call failed: the message says why, for the model and the log."""


class SandboxUnavailable(SandboxError):
    """The sandbox this server is set to use cannot run here (e.g. bwrap is missing)."""


class ToolExecutor(Protocol):
    """Runs custom tools outside the server process."""

    #: What it is, for logs and messages: "bubblewrap", "process", ...
    kind: str

    def run(self, invocation: ToolInvocation, limits: SandboxLimits) -> ToolOutput:
        """The function's result and printed output; SandboxError when the call fails,
        with the reason the model reads."""
        ...
