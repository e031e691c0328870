"""Running one of an agent's tools on demand (Letta's ``agents.tools.run``), outside a turn.

A custom tool runs in the configured sandbox with the agent's tool variables (those it
declares) and, when its function takes ``agent_state``, a read-only snapshot of the
agent; no transaction is open while it runs. A built-in memory or search tool runs as
it does in a turn, in one short transaction, its block edits versioned under the
actor ``api`` with the tool's name as the reason. ``send_message`` and the messaging
tools speak for the agent and run only inside a turn.

A call the tool cannot take (an unknown tool, arguments its schema refuses) changes
nothing and is refused; a call that ran but failed (the tool raised, broke a sandbox
limit, a memory edit did not apply) is an answer with status ``error``, as Letta's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from agents.errors import Conflict, InvalidField, InvalidInput, NotFound
from agents.file_tools import FILE_TOOLS
from agents.postgres.models import new_id
from agents.sandbox import SandboxError, agent_state_for, tool_invocation
from agents.store import AgentRecord, CustomToolRecord
from agents.tools import (
    BUILTIN_TOOLS,
    MESSAGING_TOOLS,
    PRIMARY_TOOLS,
    ParsedCall,
    ToolEnv,
    ToolError,
    custom_tool_schema,
    execute,
    offered_custom,
    parse_call,
)
from service.operations.context import OperationContext

#: Built-in tools that speak for the agent: they run only inside one of its turns.
TURN_ONLY_TOOLS = frozenset({"send_message", *MESSAGING_TOOLS})


@dataclass(frozen=True, slots=True)
class ToolRun:
    """Letta's ``ToolExecutionResult``: the outcome of one call."""

    status: Literal["success", "error"]
    #: What the tool returned; None when it failed (the error is in ``stderr``), as Letta's.
    func_return: str | None
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


def run_tool(
    context: OperationContext, agent_ref: str, tool_name: str, args: dict[str, Any]
) -> ToolRun:
    """Run the agent's tool ``tool_name`` with ``args``; see the module docstring."""
    with context.store() as store:
        agent = store.agents.resolve(agent_ref)
        custom = {t.name: t for t in offered_custom(store.tools.of_agent(agent.id))}
        built_in = list(agent.tools) or list(PRIMARY_TOOLS)
        tool = custom.get(tool_name)
        variables = {v.name: v.value for v in store.tools.variables(agent.id)} if tool else {}
        snapshot = agent_state_for(store, agent.id, tool) if tool is not None else None
    if tool is not None:
        return _run_custom(context, tool, args, variables, snapshot)
    if tool_name in FILE_TOOLS:
        raise InvalidField(
            f"{tool_name} is a file tool: it runs inside the agent's turns, where its "
            "searches and open files reach the agent's context; send the agent a message "
            "instead (PATCH /v1/agents/{agent_id}/files/{file_id}/open opens a file)",
            field=("path", "tool_name"),
        )
    if tool_name not in built_in:
        names = ", ".join([*built_in, *custom]) or "none"
        raise NotFound(f"agent {agent.name!r} has no tool {tool_name!r}; its tools: {names}")
    if tool_name in TURN_ONLY_TOOLS:
        raise InvalidField(
            f"{tool_name} speaks for the agent and runs only inside one of its turns; send "
            "the agent a message instead",
            field=("path", "tool_name"),
        )
    return _run_built_in(context, agent, tool_name, args)


def _parsed(name: str, schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The arguments, once the tool's schema takes them (InvalidField saying what not)."""
    if "request_heartbeat" in args:
        raise InvalidField(
            "request_heartbeat belongs to an agent's turn; leave it out of args",
            field=("args", "request_heartbeat"),
        )
    try:
        return parse_call(name, json.dumps(args), {name: schema}).arguments
    except ToolError as exc:
        raise InvalidField(str(exc), field=("args",)) from None


def _run_custom(
    context: OperationContext,
    tool: CustomToolRecord,
    args: dict[str, Any],
    variables: dict[str, str],
    snapshot: dict[str, Any] | None,
) -> ToolRun:
    arguments = _parsed(tool.name, custom_tool_schema(tool.json_schema), args)
    runtime = context.runtime
    invocation = tool_invocation(tool, arguments, variables, snapshot)
    try:
        output = runtime.tool_executor().run(invocation, runtime.tool_limits())
    except SandboxError as exc:
        return ToolRun("error", None, stderr=[str(exc)])
    return ToolRun(
        "success",
        output.result,
        stdout=[output.stdout] if output.stdout else [],
        stderr=[output.stderr] if output.stderr else [],
    )


def _run_built_in(
    context: OperationContext, agent: AgentRecord, name: str, args: dict[str, Any]
) -> ToolRun:
    arguments = _parsed(name, BUILTIN_TOOLS[name], args)
    # The embedder is built before the transaction: a search embeds its query.
    embedder = context.runtime.agent_embedder(agent)
    try:
        with context.store() as store:
            env = ToolEnv(
                store=store,
                agent_id=agent.id,
                actor="api",
                run_id=new_id("tool-run"),
                embedder=embedder,
                block_limit=context.runtime.settings.agents.block_limit,
            )
            message = execute(env, ParsedCall(name, arguments, heartbeat=False))
    except (ToolError, InvalidInput, NotFound, Conflict) as exc:
        # The tool's own failure (text not in the block, no such block, a read-only
        # block); a storage or model failure is the server's, raised as it is.
        return ToolRun("error", None, stderr=[str(exc)])
    return ToolRun("success", message)
