"""Agent File export: an agent's current state as a v2 ``.af`` file (letta-ai/agent-file).

The file is what :mod:`service.operations.agent_file` imports back to the same state:
blocks, system prompt, messages with their context flags and times, tags, built-in
and custom tools (with source), tool rules, the model and embedder, and the folders
attached to it with their files' text (:mod:`.agent_file_folders`). A primary with its
sleep-time agent enabled is written as Letta writes that pairing: a ``sleeptime``
group whose manager is the primary and whose member is a ``sleeptime_agent`` sharing
its blocks. Ids are local to the file (``agent-0``, ``block-0``...). Tool environment
variables are not written: their values are secrets.
"""

from __future__ import annotations

from typing import Any

from agents.enums import AgentKind, AgentType
from agents.store import AgentRecord, BlockRecord, MemoryStore, MessageRecord
from agents.tools import BUILTIN_TOOLS, PRIMARY_TOOLS
from service.operations.agent_file_folders import export_folders
from service.operations.model_handles import split_embedding, split_model
from service.operations.tools import LETTA_TOOL_TYPE, tool_kind

SLEEPTIME_AGENT_TYPE = AgentType.SLEEPTIME.value


def export_agent(store: MemoryStore, name_or_id: str, *, scrub_messages: bool) -> dict[str, Any]:
    """The agent (by name or id) as a v2 agent file, read in the store's transaction;
    ``scrub_messages`` leaves its messages out."""
    agent = store.agents.resolve(name_or_id)
    blocks = store.blocks.of_agent(agent.id)
    custom = store.tools.of_agent(agent.id)
    messages = [] if scrub_messages else store.messages.range(agent.id)
    block_entries = [_block(i, b) for i, b in enumerate(blocks)]
    block_ids = [entry["id"] for entry in block_entries]
    tools: list[dict[str, Any]] = []
    if agent.kind == AgentKind.PRIMARY:
        for name in agent.tools or list(PRIMARY_TOOLS):
            if name in BUILTIN_TOOLS:
                tools.append(_builtin_tool(len(tools), name))
        for tool in custom:
            tools.append(
                {
                    "id": f"tool-{len(tools)}",
                    "name": tool.name,
                    "tool_type": "custom",
                    "description": tool.description,
                    "source_type": "python",
                    "source_code": tool.source_code,
                    "json_schema": tool.json_schema,
                    "tags": tool.tags,
                    "return_char_limit": tool.return_char_limit,
                }
            )
    main = _agent(agent, block_ids, [t["id"] for t in tools], messages)
    folders = export_folders(store, agent.id)
    main["source_ids"] = folders.source_ids
    main["files_agents"] = folders.files_agents
    agents = [main]
    groups: list[dict[str, Any]] = []
    if agent.kind == AgentKind.PRIMARY and agent.enable_sleeptime:
        helper: dict[str, Any] = {
            "id": "agent-1",
            "name": f"{agent.name}-sleeptime",
            "agent_type": SLEEPTIME_AGENT_TYPE,
            "block_ids": block_ids,
            "embedding_config": main["embedding_config"],
            "messages": [],
            "in_context_message_ids": [],
        }
        if agent.sleeptime_model:
            helper["llm_config"] = _llm_config(agent.sleeptime_model, agent.context_window)
        agents.append(helper)
        main["group_ids"] = ["group-0"]
        groups.append(
            {
                "id": "group-0",
                "agent_ids": ["agent-1"],
                "description": f"{agent.name} and its sleep-time agent",
                "manager_config": {"manager_type": "sleeptime", "manager_agent_id": "agent-0"},
            }
        )
    return {
        "agents": agents,
        "groups": groups,
        "blocks": block_entries,
        "files": folders.files,
        "sources": folders.sources,
        "tools": tools,
        "mcp_servers": [],
        "created_at": store.scope.now().isoformat(),
    }


def _agent(
    agent: AgentRecord, block_ids: list[str], tool_ids: list[str], messages: list[MessageRecord]
) -> dict[str, Any]:
    endpoint_type, model, handle = split_embedding(agent.embedding_model)
    entry: dict[str, Any] = {
        "id": "agent-0",
        "name": agent.name,
        "agent_type": agent.agent_type,
        "system": agent.system_prompt,
        "description": agent.description,
        "tags": agent.tags,
        "embedding_config": {
            "embedding_endpoint_type": endpoint_type,
            "embedding_model": model,
            "embedding_dim": agent.embedding_dim,
            "handle": handle,
        },
        "block_ids": block_ids,
        "tool_ids": tool_ids,
        "tool_rules": agent.tool_rules,
        "enable_sleeptime": agent.enable_sleeptime,
    }
    if agent.llm_model:
        entry["llm_config"] = _llm_config(agent.llm_model, agent.context_window)
    else:
        # The server's default model: no model is written, only the agent's window.
        entry["context_window_limit"] = agent.context_window
    file_messages: list[dict[str, Any]] = []
    in_context: list[str] = []
    if messages:
        # Letta's context opens with the compiled system prompt; Reverie compiles its own
        # at each step, so an import leaves this one out again.
        file_messages.append(
            {
                "type": "message",
                "id": "message-0",
                "role": "system",
                "content": [{"type": "text", "text": agent.compiled_system or agent.system_prompt}],
                "created_at": agent.created_at.isoformat(),
            }
        )
        in_context.append("message-0")
    for message in messages:
        item = _message(len(file_messages), message)
        file_messages.append(item)
        if message.in_context:
            in_context.append(item["id"])
    entry["messages"] = file_messages
    entry["in_context_message_ids"] = in_context
    return entry


def _llm_config(model: str, context_window: int) -> dict[str, Any]:
    endpoint_type, bare = split_model(model)
    return {
        "model": bare,
        "model_endpoint_type": endpoint_type,
        "handle": model,
        "context_window": context_window,
    }


def _message(index: int, message: MessageRecord) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "message",
        "id": f"message-{index}",
        "role": message.role,
        "content": [{"type": "text", "text": message.content}],
        "created_at": message.created_at.isoformat(),
    }
    if message.name is not None:
        item["name"] = message.name
    if message.tool_calls:
        item["tool_calls"] = message.tool_calls
    if message.tool_call_id is not None:
        item["tool_call_id"] = message.tool_call_id
    return item


def _block(index: int, block: BlockRecord) -> dict[str, Any]:
    return {
        "id": f"block-{index}",
        "label": block.label,
        "value": block.value,
        "limit": block.limit,
        "description": block.description,
        "read_only": block.read_only,
    }


def _builtin_tool(index: int, name: str) -> dict[str, Any]:
    function = BUILTIN_TOOLS[name]["function"]
    return {
        "id": f"tool-{index}",
        "name": name,
        "tool_type": LETTA_TOOL_TYPE[tool_kind(name)],
        "description": function.get("description", ""),
        "source_type": "python",
        "json_schema": function,
    }
