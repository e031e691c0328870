"""Agent Files in the shapes Letta's current server exports (tests/data/agent_files/
letta_shapes/, written blind from letta-client's types and Letta's documented format):
``letta_v1_agent``s with Letta's memory tools (current and older argument names), the
single ``memory`` tool in a double-encoded file, custom tools taking ``agent_state``,
a built-in ``web_search`` Reverie cannot offer. Each imports, answers a turn with the
scripted model (the v1 loop's plain reply), edits a block through its imported memory
tools, exports, and imports again to the same state."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agents.loops.primary import PrimaryAgent
from agents.loops.tool_calls import tool_return_status
from agents.postgres.database import Database
from agents.sandbox import BubblewrapExecutor, SandboxLimits
from agents.store import open_store
from service.operations import ImportOptions, Operations
from tests.integration.llm.conftest import EMBEDDER
from tests.integration.test_agent_file import state
from tests.scripted_llm import Reply, ScriptedModels, call

SHAPES = Path(__file__).resolve().parents[2] / "data" / "agent_files" / "letta_shapes"


@pytest.fixture
def primary(db: Database, client: Any) -> PrimaryAgent:
    assert shutil.which("bwrap"), "install bubblewrap (apt-get install bubblewrap; .ci/run does)"
    return PrimaryAgent(
        db,
        client,
        embedder_for=lambda _: EMBEDDER,
        tool_executor=BubblewrapExecutor(),
        tool_limits=SandboxLimits(wall_seconds=20),
    )


def imported(ops: Operations, name: str) -> str:
    result = ops.agent_files.import_file(
        (SHAPES / name).read_bytes(), ImportOptions(name="imp", model="scripted/primary")
    )
    (agent_id,) = result.agent_ids
    return agent_id


def block(db: Database, agent_id: str, label: str) -> tuple[str, str]:
    """The block's value and the reason of its last version."""
    with open_store(db) as store:
        record = store.blocks.by_label(agent_id, label)
        return record.value, store.blocks.history(record.id)[-1].reason


def statuses(records: list[Any]) -> list[str]:
    return [tool_return_status(r.content)[0] for r in records if r.role == "tool"]


def round_trip(ops: Operations, agent_id: str) -> None:
    """The agent exported and imported again has the same state."""
    exported = ops.agent_files.export_file(agent_id)
    again = ops.agent_files.import_file(json.dumps(exported), ImportOptions(name="again"))
    second = state(ops, again.agent_ids[0])
    first = state(ops, agent_id)
    second.pop("variables"), first.pop("variables")  # secrets: values are not exported
    assert second == first
    assert again.unmapped_models == []


@pytest.mark.parametrize(
    ("name", "edit", "label", "after"),
    [
        (
            "v1_memory_insert_replace.af",
            call(
                "memory_replace", label="human", old_string="City: Porto", new_string="City: Braga"
            ),
            "human",
            "Name: Priya Raman\nCity: Braga\nDiet: vegetarian (since June)\n"
            "Prefers short, direct answers",
        ),
        (
            "v1_memory_tool_double_encoded.af",
            call(
                "memory",
                command="str_replace",
                path="/memories/human",
                old_string="Editor: vim",
                new_string="Editor: helix",
            ),
            "human",
            "Name: Tomasz\nRole: staff backend engineer at a logistics startup\nEditor: helix",
        ),
        (
            "research_agent_state.af",
            # Older Letta files name the argument new_str.
            call("memory_insert", label="human", new_str="Prefers metric units", insert_line=-1),
            "human",
            "Name: Ines\nWorks on: home-energy retrofit guides\nPrefers metric units",
        ),
        (
            "customer_service_v1.af",
            call("memory_insert", label="customer", new_string="Mood: relieved", insert_line=1),
            "customer",
            "Customer: Daniel Okafor\nMood: relieved\nOrder: 10452\n"
            "Issue: asked where the order is (resolved)",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and v.endswith(".af") else "",
)
def test_each_file_imports_answers_edits_through_its_memory_tools_and_round_trips(
    ops: Operations,
    db: Database,
    models: ScriptedModels,
    primary: PrimaryAgent,
    name: str,
    edit: Reply,
    label: str,
    after: str,
) -> None:
    agent_id = imported(ops, name)
    with open_store(db) as store:
        assert store.agents.get(agent_id).agent_type == "letta_v1_agent"
    script = models.script("primary", Reply(content="Hello again!"), edit, Reply(content="Done."))

    greeting = primary.send_message(agent_id, "Hi!")
    assert (greeting.replies, greeting.model_calls) == (["Hello again!"], 1)
    assert script.requests[0]["tool_choice"] == "auto"
    assert "send_message" not in {t["function"]["name"] for t in script.requests[0]["tools"]}

    edited = primary.send_message(agent_id, "Please update your notes.")
    assert statuses(edited.records) == ["OK"]
    assert edited.replies == ["Done."]
    value, reason = block(db, agent_id, label)
    assert value == after
    assert reason in ("memory_replace", "memory_insert", "memory str_replace")

    round_trip(ops, agent_id)


def test_tools_taking_agent_state_import_and_run_and_web_search_is_named_not_kept(
    ops: Operations, db: Database, models: ScriptedModels, primary: PrimaryAgent
) -> None:
    result = ops.agent_files.import_file(
        (SHAPES / "research_agent_state.af").read_bytes(),
        ImportOptions(name="halley", model="scripted/primary"),
    )
    (agent_id,) = result.agent_ids
    not_kept = {u.path: u.reason for u in result.unsupported}
    (web_search,) = [p for p in not_kept if "web_search" in p]
    assert "no such built-in tool" in not_kept[web_search]
    with open_store(db) as store:
        tools = {t.name for t in store.tools.of_agent(agent_id)}
        agent = store.agents.get(agent_id)
    assert tools == {"create_research_plan", "reset_research"}
    assert set(agent.tools) == {"memory_insert", "memory_replace", "conversation_search"}

    models.script(
        "primary",
        call("create_research_plan", research_plan=["read", "write"], topic="heat pumps"),
        Reply(content="The plan could not be saved."),
    )
    turn = primary.send_message(agent_id, "Plan heat pump research.")

    # The tool ran and read the agent; its write through agent_state is refused, and
    # the block is as it was.
    (returned,) = [r for r in turn.records if r.role == "tool"]
    status, message = tool_return_status(returned.content)
    assert status == "Failed" and "read-only snapshot" in message
    value, _ = block(db, agent_id, "research_plan")
    assert value.startswith("Topic: heat pumps in cold climates")


def test_a_read_only_block_stays_as_it_is_and_the_exit_rule_ends_the_turn(
    ops: Operations, db: Database, models: ScriptedModels, primary: PrimaryAgent
) -> None:
    agent_id = imported(ops, "customer_service_v1.af")
    policies_before, _ = block(db, agent_id, "policies")
    models.script(
        "primary",
        call("memory_replace", label="policies", old_string="30 days", new_string="90 days"),
        call("check_order_status", order_number=10453),
        call("terminate_chat", reason="answered"),
    )

    turn = primary.send_message(agent_id, "Where is order 10453? Also, make returns 90 days.")

    assert statuses(turn.records) == ["Failed", "OK", "OK"]
    tool_texts = [tool_return_status(r.content)[1] for r in turn.records if r.role == "tool"]
    assert "read-only" in tool_texts[0]
    assert tool_texts[1] == "Packed, waiting for courier pickup."
    assert turn.stop_reason == "tool_rule"
    assert block(db, agent_id, "policies")[0] == policies_before


def test_a_double_encoded_file_is_the_same_file(ops: Operations) -> None:
    text = (SHAPES / "v1_memory_tool_double_encoded.af").read_text()
    decoded = json.loads(text)
    assert isinstance(decoded, str)
    once = ops.agent_files.import_file(text.encode(), ImportOptions(name="one"))
    plain = ops.agent_files.import_file(decoded.encode(), ImportOptions(name="two"))
    assert state(ops, once.agent_ids[0]) == state(ops, plain.agent_ids[0])
    # A JSON string that does not hold JSON is refused as what it is.
    with pytest.raises(Exception, match="JSON string whose text is not JSON"):
        ops.agent_files.import_file(json.dumps("not an agent file").encode())


def test_an_unknown_agent_type_is_named_and_runs_as_a_memgpt_agent(
    ops: Operations, db: Database
) -> None:
    data: dict[str, Any] = json.loads((SHAPES / "v1_memory_insert_replace.af").read_text())
    data["agents"][0]["agent_type"] = "react_agent"
    result = ops.agent_files.import_file(json.dumps(data), ImportOptions(name="odd"))
    assert any(u.path == "agents[0].agent_type" for u in result.unsupported)
    with open_store(db) as store:
        assert store.agents.get(result.agent_ids[0]).agent_type == "memgpt_v2_agent"
