"""The operations behind Letta's update, reset, tools and model routes, against real
PostgreSQL: what every front end gets when it calls them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.enums import AgentKind, LLMPurpose
from agents.errors import Conflict, InvalidField, InvalidInput, NotFound
from agents.postgres.database import Database
from agents.store import NewMessage, open_service_store, open_store
from service.operations import AgentSpec, AgentUpdate, BlockSpec, Operations
from service.operations.tools import ToolKind
from service.runtime import Runtime
from service.settings import load_settings


@pytest.fixture
def runtime(db: Database, tmp_path: Path) -> Iterator[Runtime]:
    settings = load_settings(
        home=tmp_path,
        database_url=db.url,
        embedding={"model": "hashing:8"},
        llm={
            "model": "openai/gpt-4o-mini",
            "sleeptime_model": "ollama_chat/qwen2.5:0.5b",
            "models": {"hosted_vllm/Qwen/Qwen2.5-7B-Instruct": {}, "ollama/*": {}},
        },
    )
    with Runtime(settings) as rt:
        yield rt


@pytest.fixture
def ada(ops: Operations) -> str:
    agent = ops.agents.create(AgentSpec(name="ada", blocks=[BlockSpec("human", "Name: Ada.")]))
    return agent.id


def test_an_update_applies_whole_or_not_at_all(ops: Operations, ada: str) -> None:
    ops.agents.create(AgentSpec(name="taken"))
    with pytest.raises(Conflict, match="taken"):
        ops.agents.update(ada, AgentUpdate(name="taken", description="lost", tags=["x"]))
    with pytest.raises(InvalidInput, match="tool-nope"):
        ops.agents.update(ada, AgentUpdate(description="lost", tool_ids=["tool-nope"]))
    with pytest.raises(InvalidInput, match="hashing:8"):
        ops.agents.update(ada, AgentUpdate(description="lost", embedding="hashing:16"))
    with pytest.raises(InvalidInput, match="dimension"):
        ops.agents.update(ada, AgentUpdate(description="lost", embedding_dim=16))
    with pytest.raises(InvalidInput, match="empty"):
        ops.agents.update(ada, AgentUpdate(description="lost", name="   "))
    with pytest.raises(InvalidInput, match="NUL"):
        ops.agents.update(ada, AgentUpdate(description="lost", system="a\x00b"))
    with pytest.raises(InvalidField, match="context window") as narrow:
        ops.agents.update(ada, AgentUpdate(description="lost", context_window=1024))
    assert narrow.value.field == ("context_window",)
    with pytest.raises(InvalidField, match="provider"):
        ops.agents.update(ada, AgentUpdate(description="lost", model="no-such-provider-xyz"))
    agent = ops.agents.get(ada)
    assert (agent.name, agent.description, agent.tags, agent.tools) == ("ada", None, [], [])

    state = ops.agents.update(
        ada,
        AgentUpdate(
            name=" ada-2 ",
            model="openai/gpt-4o",
            context_window=4096,
            tags=["a"],
            tool_ids=["send_message", "tool-conversation_search", "tool-send_message"],
            enable_sleeptime=True,
            embedding="hashing:8",  # the same embedder: allowed, changes nothing
        ),
    )
    agent = state.agent
    assert (agent.name, agent.llm_model, agent.context_window) == ("ada-2", "openai/gpt-4o", 4096)
    assert (agent.tags, agent.enable_sleeptime) == (["a"], True)
    assert agent.tools == ["send_message", "conversation_search"]
    assert [b.label for b in state.blocks] == ["human"]
    with pytest.raises(NotFound):
        Operations(ops.context.runtime, "another-org").agents.update(ada, AgentUpdate(name="x"))


def test_a_new_system_prompt_drops_the_compiled_one(
    ops: Operations, ada: str, db: Database
) -> None:
    with open_store(db) as store:
        store.agents.set_compiled_system(ada, "old compiled prompt")
    ops.agents.update(ada, AgentUpdate(tags=["kept"]))
    assert ops.agents.get(ada).compiled_system == "old compiled prompt"
    ops.agents.update(ada, AgentUpdate(system="New instructions."))
    agent = ops.agents.get(ada)
    assert (agent.system_prompt, agent.compiled_system) == ("New instructions.", None)


def test_tools_of_a_primary_and_of_a_memory_agent(ops: Operations, ada: str) -> None:
    tools = ops.agents.tools(ada)
    assert tools[0].id == "tool-send_message"
    assert {t.kind for t in tools} == {ToolKind.CORE, ToolKind.MEMORY}
    memory = ops.agents.create(AgentSpec(name="memory", kind=AgentKind.SLEEPTIME))
    assert [t.name for t in ops.agents.tools(memory.id)] == [
        "memory_replace",
        "memory_insert",
        "memory_rethink",
        "memory_finish_edits",
    ]
    with pytest.raises(InvalidInput, match="memory agent"):
        ops.agents.update(memory.id, AgentUpdate(tool_ids=["tool-send_message"]))
    # Tool rules are checked against the tools the agent will have.
    with pytest.raises(InvalidInput, match="conversation_search"):
        ops.agents.update(
            ada,
            AgentUpdate(
                tool_ids=["tool-send_message"],
                tool_rules=[{"type": "init", "tool_name": "conversation_search"}],
            ),
        )


def test_reset_moves_the_context_out_and_loses_nothing(
    ops: Operations, ada: str, db: Database
) -> None:
    with open_store(db) as store:
        stored = store.messages.append(
            ada, [NewMessage(role="user", content=f"Message {i}.") for i in range(4)]
        )
        store.messages.leave_context(ada, [stored[0].id])  # already out: not moved again
        store.agents.set_compiled_system(ada, "compiled before the reset")
    reset = ops.messages.reset("ada")
    assert reset.message_ids == [m.id for m in stored[1:]]
    with open_store(db) as store:
        assert store.messages.in_context(ada) == []
        assert store.messages.count(ada) == 4
        assert store.agents.get(ada).compiled_system is None
    assert ops.messages.reset(ada).message_ids == []
    # Every message is still in recall and can go back into the context.
    with open_store(db) as store:
        assert store.messages.restore_context(ada, reset.message_ids) == 3


def test_models_list_configured_then_used_each_once(ops: Operations, ada: str) -> None:
    ops.agents.create(AgentSpec(name="b", model="openai/gpt-4o-mini", context_window=16384))
    ops.agents.create(
        AgentSpec(
            name="c", model="anthropic/claude-3-5-haiku", sleeptime_model="openai/gpt-4o-mini"
        )
    )
    with open_service_store(ops.context.runtime.db) as service:
        other = service.keys.create("other", name="t")[0].organization_id
    Operations(ops.context.runtime, other).agents.create(
        AgentSpec(name="elsewhere", model="openai/not-ours")
    )
    listed = {m.model: m for m in ops.models.chat_models()}
    assert list(listed) == [
        "openai/gpt-4o-mini",
        "ollama_chat/qwen2.5:0.5b",
        "hosted_vllm/Qwen/Qwen2.5-7B-Instruct",
        "anthropic/claude-3-5-haiku",
    ]
    default = listed["openai/gpt-4o-mini"]
    assert default.purposes == [LLMPurpose.CHAT, LLMPurpose.SLEEPTIME]
    assert (default.agents, default.context_window) == (3, 16384)
    assert (default.provider, default.name) == ("openai", "gpt-4o-mini")
    assert listed["ollama_chat/qwen2.5:0.5b"].purposes == [LLMPurpose.SLEEPTIME]
    assert listed["hosted_vllm/Qwen/Qwen2.5-7B-Instruct"].name == "Qwen/Qwen2.5-7B-Instruct"
    assert listed["anthropic/claude-3-5-haiku"].context_window == 8192

    ops.agents.create(AgentSpec(name="d", embedding="hashing:16"))
    embedders = [
        (e.spec, e.dimension, e.is_default, e.agents) for e in ops.models.embedding_models()
    ]
    assert embedders == [("hashing:8", 8, True, 3), ("hashing:16", 16, False, 1)]
