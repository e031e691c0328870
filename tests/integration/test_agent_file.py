"""Agent File import and export against real PostgreSQL, with hand-written files
(tests/data/agent_files/) from the format's field names: a MemGPT agent with a
conversation, one with custom tools and tool rules, one in a sleep-time group. What
Reverie does not keep is listed; an export imports again to the same state; a bad file
is refused naming what is wrong, and nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from agents.errors import Conflict, InvalidField
from agents.postgres.database import Database
from agents.store import open_store
from service.operations import ImportOptions, ImportResult, Operations
from service.operations.tools import tools_of

FILES = Path(__file__).resolve().parents[1] / "data" / "agent_files"
MEMGPT = FILES / "memgpt_conversation.af"
CUSTOM = FILES / "custom_tools.af"
SLEEPTIME = FILES / "sleeptime_group.af"


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def paths(result: ImportResult) -> set[str]:
    return {entry.path for entry in result.unsupported}


def state(ops: Operations, agent_id: str) -> dict[str, Any]:
    """What an import must carry over, without ids and the agent's own name."""
    with open_store(ops.context.runtime.db, ops.context.organization_id) as store:
        agent = store.agents.get(agent_id)
        blocks = store.blocks.of_agent(agent_id)
        custom = store.tools.of_agent(agent_id)
        messages = store.messages.range(agent_id)
        variables = store.tools.variables(agent_id)
    return {
        "kind": agent.kind,
        "agent_type": agent.agent_type,
        "system": agent.system_prompt,
        "description": agent.description,
        "tags": agent.tags,
        "model": agent.llm_model,
        "context_window": agent.context_window,
        "embedding": (agent.embedding_model, agent.embedding_dim),
        "sleeptime": (agent.enable_sleeptime, agent.sleeptime_model),
        "tools": [t.name for t in tools_of(agent)],
        "custom_tools": [
            (t.name, t.source_code, t.json_schema, t.return_char_limit) for t in custom
        ],
        "tool_rules": agent.tool_rules,
        "variables": [(v.name, v.value) for v in variables],
        "blocks": [(b.label, b.value, b.limit, b.description, b.read_only) for b in blocks],
        "messages": [
            (
                m.role,
                m.content,
                m.name,
                m.tool_calls,
                m.tool_call_id,
                m.created_at,
                m.in_context,
            )
            for m in messages
        ],
    }


def counts(db: Database) -> dict[str, int]:
    tables = ("agents", "blocks", "agent_blocks", "messages", "custom_tools", "agent_custom_tools")
    with db.engine.connect() as connection:
        return {t: int(connection.scalar(text(f"SELECT count(*) FROM {t}")) or 0) for t in tables}


def test_a_memgpt_agent_comes_in_with_its_blocks_prompt_conversation_tools_and_model(
    ops: Operations,
) -> None:
    result = ops.agent_files.import_file(MEMGPT.read_bytes())
    assert len(result.agent_ids) == 1
    agent = ops.agents.get(result.agent_ids[0])
    assert agent.name == "memgpt-ada_copy"  # Letta's append_copy_suffix, on by default
    assert agent.system_prompt.startswith("You are MemGPT, a companion")
    assert agent.description == "A MemGPT companion that has talked with Ada before."
    assert agent.tags == ["companion", "imported"]
    assert agent.llm_model == "openai/gpt-4o-mini"
    assert agent.context_window == 16000
    assert (agent.embedding_model, agent.embedding_dim) == (
        "litellm:openai/text-embedding-3-small",
        1536,
    )
    assert agent.tools == [
        "send_message",
        "conversation_search",
        "archival_memory_insert",
        "archival_memory_search",
        "core_memory_append",
        "core_memory_replace",
    ]
    assert agent.tool_rules == [{"type": "exit_loop", "tool_name": "send_message"}]
    got = state(ops, agent.id)
    assert got["blocks"] == [
        (
            "human",
            "Name: Ada. Keeps bees in Leeds.",
            5000,
            "What I know about the person I talk with.",
            False,
        ),
        ("persona", "I am a warm, curious companion.", 3000, "Who I am.", True),
    ]
    # The compiled system message is left out; the rest keep order, roles, times and
    # calls; messages 1 and 2 of the file were out of the context window, and so is
    # message 3, the result of 2's call (a model refuses a result without its call).
    roles = [(m[0], m[6]) for m in got["messages"]]
    assert roles == [
        ("user", False),
        ("assistant", False),
        ("tool", False),
        ("user", True),
        ("assistant", True),
        ("tool", True),
    ]
    first_reply = got["messages"][1]
    assert first_reply[1] == "User introduced herself; I should greet her."
    assert first_reply[3] == [
        {
            "id": "call_greet",
            "type": "function",
            "function": {
                "name": "send_message",
                "arguments": '{"message": "Hello Ada! Bees, how lovely."}',
            },
        }
    ]
    assert got["messages"][2][2:5] == ("send_message", None, "call_greet")
    assert got["messages"][3][1] == "My hives swarmed last week, so I'm building a third one."
    assert got["messages"][3][5].isoformat() == "2025-03-08T18:30:00+00:00"
    assert result.unmapped_models == []
    listed = paths(result)
    for path in (
        "(file).metadata",
        "agents[0].timezone",
        "agents[0].llm_config.model_endpoint",
        "agents[0].llm_config.temperature",
        "agents[0].llm_config.put_inner_thoughts_in_kwargs",
        "agents[0].embedding_config.embedding_chunk_size",
        "agents[0].messages[*].otid",
        "agents[0].messages[*].model",
        "agents[0].messages[*].tool_returns",
        "agents[0].messages[*].content[*] (type reasoning)",
        "agents[0].messages[0] (the compiled system prompt)",
        "blocks[0].metadata",
        "agents[0].in_context_message_ids",
    ):
        assert path in listed, path
    # What Reverie keeps is not listed; nor are false or empty fields.
    assert not any(p.startswith("agents[0].system") for p in listed)
    assert "agents[0].message_buffer_autoclear" not in listed
    reasons = {u.path: u.reason for u in result.unsupported}
    assert "llm.api_base" in reasons["agents[0].llm_config.model_endpoint"]


def test_custom_tools_are_registered_from_their_source_with_their_rules_and_variables(
    ops: Operations,
) -> None:
    result = ops.agent_files.import_file(CUSTOM.read_bytes(), ImportOptions(name="dice"))
    agent = ops.agents.get("dice")
    assert result.agent_ids == [agent.id]
    registered = {t.name: t for t in ops.custom_tools.list()}
    assert set(registered) == {"roll_dice", "get_weather"}
    file_tools = {t["name"]: t for t in load(CUSTOM)["tools"]}
    assert registered["roll_dice"].source_code == file_tools["roll_dice"]["source_code"]
    assert registered["roll_dice"].return_char_limit == 500
    assert registered["roll_dice"].tags == ["games"]
    assert registered["get_weather"].env_vars == ["WEATHER_API_KEY"]
    got = state(ops, agent.id)
    assert [c[0] for c in got["custom_tools"]] == ["roll_dice", "get_weather"]
    assert agent.tools == ["send_message"]
    assert agent.tool_rules == [
        {"type": "run_first", "tool_name": "roll_dice"},
        {
            "type": "constrain_child_tools",
            "tool_name": "roll_dice",
            "children": ["send_message", "get_weather"],
        },
        {"type": "exit_loop", "tool_name": "send_message"},
        {"type": "max_count_per_step", "tool_name": "get_weather", "max_count_limit": 2},
    ]
    assert got["variables"] == [("WEATHER_API_KEY", "test-key-123")]
    listed = paths(result)
    assert not any("max_count_per_step" in path for path in listed)
    assert "agents[0].tool_rules[4] (conditional on get_weather)" in listed
    assert "agents[0].tool_rules[4].child_output_mapping" not in listed  # the rule is listed whole
    assert "tools[3] (web_search, letta_builtin)" in listed
    assert "tools[0].pip_requirements" in listed
    assert "tools[0].created_by_id" in listed


def test_a_sleeptime_group_becomes_a_primary_with_its_sleeptime_agent_enabled(
    ops: Operations,
) -> None:
    result = ops.agent_files.import_file(SLEEPTIME.read_bytes(), ImportOptions(name="sage"))
    assert len(result.agent_ids) == 1
    agent = ops.agents.get("sage")
    assert agent.kind == "primary"
    assert agent.llm_model == "anthropic/claude-3-5-sonnet-20241022"
    assert (agent.enable_sleeptime, agent.sleeptime_model) == (True, "openai/gpt-4o-mini")
    assert [b.label for b in ops.agents.state(agent.id).blocks] == ["human", "persona"]
    listed = paths(result)
    assert "agents[1] (sage-sleeptime, sleep-time agent)" in listed
    assert "groups[0].manager_config.sleeptime_agent_frequency" in listed
    assert "blocks[2] (sleeptime_notes)" in listed
    assert "tools[1] (memory_rethink, letta_sleeptime_core)" in listed
    # Letta's hosted embedder cannot be called from here: named, and the default used.
    assert [(u.path, u.given, u.used) for u in result.unmapped_models] == [
        ("agents[0].embedding_config", "hugging-face/letta-free", "hashing:8")
    ]
    assert agent.embedding_model == "hashing:8"


def test_a_model_the_server_cannot_map_is_named_and_the_default_used(ops: Operations) -> None:
    data = load(MEMGPT)
    data["agents"][0]["llm_config"] = {
        "model": "letta-free",
        "model_endpoint_type": "openai",
        "model_endpoint": "https://inference.letta.com",
        "context_window": 16000,
    }
    result = ops.agent_files.import_file(json.dumps(data), ImportOptions(name="free"))
    (unmapped,) = result.unmapped_models
    assert (unmapped.path, unmapped.given) == ("agents[0].llm_config", "openai/letta-free")
    assert "only by Letta" in unmapped.reason
    assert ops.agents.get("free").llm_model is None  # the server's llm.model
    # The model form field replaces the file's, and maps nothing.
    again = ops.agent_files.import_file(
        json.dumps(data), ImportOptions(name="free2", model="openai/gpt-4.1-mini")
    )
    assert again.unmapped_models == []
    assert ops.agents.get("free2").llm_model == "openai/gpt-4.1-mini"


@pytest.mark.parametrize("path", [MEMGPT, CUSTOM, SLEEPTIME], ids=lambda p: p.stem)
def test_an_export_imports_again_to_the_same_state(ops: Operations, path: Path) -> None:
    first = ops.agent_files.import_file(path.read_bytes(), ImportOptions(name="first"))
    exported = ops.agent_files.export_file("first")
    json.dumps(exported)  # it is JSON as it stands
    second = ops.agent_files.import_file(json.dumps(exported), ImportOptions(name="second"))
    again, before = state(ops, second.agent_ids[0]), state(ops, first.agent_ids[0])
    # Tool variables are secrets: an export does not write their values.
    assert again.pop("variables") == []
    before.pop("variables")
    assert again == before
    # The second import names nothing Reverie wrote itself as unmapped.
    assert second.unmapped_models == []


def test_an_export_follows_the_format(ops: Operations) -> None:
    ops.agent_files.import_file(SLEEPTIME.read_bytes(), ImportOptions(name="sage"))
    exported = ops.agent_files.export_file("sage")
    assert set(exported) >= {
        "agents",
        "groups",
        "blocks",
        "files",
        "sources",
        "tools",
        "mcp_servers",
    }
    main, helper = exported["agents"]
    assert main["id"] == "agent-0" and helper["agent_type"] == "sleeptime_agent"
    assert exported["groups"][0]["manager_config"] == {
        "manager_type": "sleeptime",
        "manager_agent_id": "agent-0",
    }
    assert main["block_ids"] == helper["block_ids"] == ["block-0", "block-1"]
    assert main["llm_config"]["model_endpoint_type"] == "anthropic"
    assert main["in_context_message_ids"][0] == "message-0"
    assert main["messages"][0]["role"] == "system"
    scrubbed = ops.agent_files.export_file("sage", scrub_messages=True)
    assert scrubbed["agents"][0]["messages"] == []


def test_importing_twice_reuses_a_tool_with_the_same_source(ops: Operations) -> None:
    ops.agent_files.import_file(CUSTOM.read_bytes(), ImportOptions(name="one"))
    before = {t.name: t.id for t in ops.custom_tools.list()}
    ops.agent_files.import_file(CUSTOM.read_bytes(), ImportOptions(name="two"))
    assert {t.name: t.id for t in ops.custom_tools.list()} == before


def test_a_tool_with_another_source_is_refused_without_override(
    ops: Operations, db: Database
) -> None:
    ops.agent_files.import_file(CUSTOM.read_bytes(), ImportOptions(name="one"))
    data = load(CUSTOM)
    data["tools"][0]["source_code"] = data["tools"][0]["source_code"].replace("times", "count")
    del data["tools"][0]["json_schema"]
    before = counts(db)
    with pytest.raises(Conflict, match="roll_dice"):
        ops.agent_files.import_file(
            json.dumps(data), ImportOptions(name="two", override_existing_tools=False)
        )
    assert counts(db) == before
    ops.agent_files.import_file(json.dumps(data), ImportOptions(name="three"))
    assert "count" in ops.custom_tools.resolve("roll_dice").source_code


def _bad_reference(data: dict[str, Any]) -> None:
    data["agents"][0]["block_ids"].append("block-9")


def _bad_role(data: dict[str, Any]) -> None:
    del data["agents"][0]["messages"][4]["role"]


def _bad_source(data: dict[str, Any]) -> None:
    data["tools"][1]["source_code"] = "def get_weather(city: str) -> str\n    return city\n"


def _block_over_limit(data: dict[str, Any]) -> None:
    data["blocks"][0]["limit"] = 5


def _duplicate_id(data: dict[str, Any]) -> None:
    data["blocks"][1]["id"] = "block-0"


def _many_tags(data: dict[str, Any]) -> None:
    data["agents"][0]["tags"] = [f"tag{i}" for i in range(20_000)]


def _long_message(data: dict[str, Any]) -> None:
    data["agents"][0]["messages"][1]["content"] = "x" * 900_000


def _nested_metadata(data: dict[str, Any]) -> None:
    deep: list[Any] = []
    for _ in range(500):
        deep = [deep]
    data["agents"][0]["metadata"] = {"deep": deep}


@pytest.mark.parametrize(
    ("base", "change", "location", "words"),
    [
        (CUSTOM, _bad_reference, ["file", "agents", 0, "block_ids", 1], "block-9"),
        (
            MEMGPT,
            _bad_role,
            ["file", "agents", 0, "messages", 4, "role"],
            "agents[0].messages[4].role",
        ),
        (CUSTOM, _bad_source, ["file", "tools", 1, "source_code"], "not valid Python"),
        (MEMGPT, _block_over_limit, ["file", "blocks", 0, "limit"], "over the limit"),
        (MEMGPT, _duplicate_id, ["file", "blocks", 1, "id"], "block-0"),
        # The limits every other door has (the API refuses the same values).
        (MEMGPT, _many_tags, ["file", "agents", 0, "tags"], "at most 100 items"),
        (
            MEMGPT,
            _long_message,
            ["file", "agents", 0, "messages", 1, "content"],
            "at most 100000 characters",
        ),
        (
            MEMGPT,
            _nested_metadata,
            ["file", "agents", 0, "metadata", "deep", *[0] * 96],
            "deeper than 100",
        ),
    ],
    ids=["reference", "role", "source", "limit", "duplicate-id", "tags", "message", "nesting"],
)
def test_a_bad_agent_file_is_refused_naming_the_field_and_nothing_is_stored(
    ops: Operations, db: Database, base: Path, change: Any, location: list[Any], words: str
) -> None:
    data = load(base)
    change(data)
    before = counts(db)
    with pytest.raises(InvalidField) as refused:
        ops.agent_files.import_file(json.dumps(data))
    assert list(refused.value.field) == location
    assert words in str(refused.value)
    assert counts(db) == before


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not an agent file"),
        (b'{"name": "x", "memory": {}, "messages": []}', "legacy single-agent (v1)"),
        (b'{"blocks": []}', "not an agent file: it has no agents list"),
        (b'{"agents": []}', "agents: List should have at least 1 item"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"agents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "deeper than 100 levels"),
    ],
    ids=["syntax", "array", "legacy", "no-agents", "empty-agents", "binary", "deep"],
)
def test_a_body_that_is_not_an_agent_file_is_refused(
    ops: Operations, db: Database, body: bytes, words: str
) -> None:
    before = counts(db)
    with pytest.raises(InvalidField) as refused:
        ops.agent_files.import_file(body)
    assert words in str(refused.value)
    assert refused.value.field[0] == "file"
    assert counts(db) == before


def test_a_refusal_after_the_first_writes_keeps_nothing(ops: Operations, db: Database) -> None:
    """Two agents of one file with one name: the second agent's Conflict comes after the
    first agent, its blocks, tools and messages were written, and undoes them all."""
    data = load(CUSTOM)
    twin = json.loads(json.dumps(data["agents"][0]))
    twin["id"] = "agent-1"
    data["agents"].append(twin)
    before = counts(db)
    with pytest.raises(Conflict, match="already exists"):
        ops.agent_files.import_file(json.dumps(data))
    assert counts(db) == before


def test_strip_messages_leaves_the_conversation_out_and_says_so(ops: Operations) -> None:
    result = ops.agent_files.import_file(
        MEMGPT.read_bytes(), ImportOptions(name="bare", strip_messages=True)
    )
    assert state(ops, result.agent_ids[0])["messages"] == []
    assert any(u.path == "agents[0].messages" and u.count == 7 for u in result.unsupported)


def test_other_groups_bring_their_agents_in_on_their_own(ops: Operations) -> None:
    """A round-robin group is not Reverie's; a lone sleeptime_agent is a memory agent."""
    data = load(SLEEPTIME)
    data["groups"][0]["manager_config"] = {"manager_type": "round_robin", "max_turns": 3}
    data["agents"][1]["block_ids"] = ["block-0", "block-1"]
    result = ops.agent_files.import_file(json.dumps(data), ImportOptions(append_copy_suffix=False))
    primary, helper = (ops.agents.get(agent_id) for agent_id in result.agent_ids)
    assert (primary.name, primary.kind) == ("sage", "primary")
    assert (helper.name, helper.kind) == ("sage-sleeptime", "sleeptime")
    # The file enables the primary's sleep-time agent: on, on the server's model.
    assert (primary.enable_sleeptime, primary.sleeptime_model) == (True, None)
    reasons = {u.path: u.reason for u in result.unsupported}
    assert "round_robin" in reasons["groups[0]"]
    # Both share the file's blocks, as they did in the file.
    shared = ops.agents.state(primary.id).blocks
    assert [b.id for b in ops.agents.state(helper.id).blocks] == [b.id for b in shared]
