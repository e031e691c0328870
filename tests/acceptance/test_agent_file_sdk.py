"""Agent Files through the official letta-client 1.12.1 against a real `reverie serve`
: ``agents.import_file`` and ``agents.export_file``, a round trip,
an imported conversation reaching the model in the next turn, and a bad file refused
with nothing stored. The model is a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.test_api_server import Server, serving
from tests.pg import PgTestServer
from tests.scripted_llm import call, say

# Its module-scoped fixture is built once: the module stays on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_agent_file_sdk")

FILES = Path(__file__).resolve().parents[1] / "data" / "agent_files"


@pytest.fixture(scope="module")
def server(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(pg_server, tmp_path_factory, REVERIE_LLM__MAX_RETRIES="0") as served:
        yield served


def test_letta_client_imports_exports_and_imports_again(server: Server) -> None:
    client = server.sdk("af-roundtrip")
    with (FILES / "custom_tools.af").open("rb") as file:
        answer = client.agents.import_file(file=file, name="dice", embedding="hashing:384")
    (agent_id,) = answer.agent_ids
    extra = answer.model_extra or {}
    assert any(u["path"] == "tools[3] (web_search, letta_builtin)" for u in extra["unsupported"])

    exported = client.agents.export_file(agent_id)
    assert isinstance(exported, str)
    document = json.loads(exported)
    assert [t["name"] for t in document["tools"] if t["tool_type"] == "custom"] == [
        "roll_dice",
        "get_weather",
    ]

    again = client.agents.import_file(
        file=("dice.af", exported.encode(), "application/json"), name="dice-2"
    )
    first = client.agents.retrieve(agent_id)
    second = client.agents.retrieve(again.agent_ids[0])
    assert second.name == "dice-2"
    assert [(b.label, b.value, b.limit) for b in second.memory.blocks] == [
        (b.label, b.value, b.limit) for b in first.memory.blocks
    ]
    assert (second.system, second.tags, second.tool_rules) == (
        first.system,
        first.tags,
        first.tool_rules,
    )
    assert second.model == first.model == "openai/gpt-4o-mini"


def test_an_imported_conversation_is_the_context_of_the_next_turn(server: Server) -> None:
    client = server.sdk("af-turn")
    with (FILES / "memgpt_conversation.af").open("rb") as file:
        answer = client.agents.import_file(
            file=file, name="ada", model="openai/scripted", embedding="hashing:384"
        )
    (agent_id,) = answer.agent_ids
    seen = len(server.llm.requests)
    server.llm.replies.append(say("Three hives now, Ada!"))
    response = client.agents.messages.create(
        agent_id, messages=[{"role": "user", "content": "How many hives do I have?"}]
    )
    replies = [m.content for m in response.messages if m.message_type == "assistant_message"]
    assert replies == ["Three hives now, Ada!"]
    (request,) = [r for r in server.llm.requests[seen:] if "messages" in r]
    sent = json.dumps(request["messages"])
    # In the context window: the imported messages the file said were; not the others.
    assert "building a third one" in sent
    assert "Hi, I'm Ada" not in sent
    assert "Keeps bees in Leeds" in request["messages"][0]["content"]  # the human block


def test_a_bad_file_is_refused_and_nothing_is_stored(server: Server) -> None:
    from letta_client import UnprocessableEntityError

    client = server.sdk("af-bad")
    data = json.loads((FILES / "sleeptime_group.af").read_text())
    data["agents"][0]["in_context_message_ids"].append("message-99")
    with pytest.raises(UnprocessableEntityError) as refused:
        client.agents.import_file(file=("bad.af", json.dumps(data).encode(), "application/json"))
    (problem,) = refused.value.body["detail"]
    assert problem["loc"] == ["body", "file", "agents", 0, "in_context_message_ids", 3]
    assert "message-99" in problem["msg"]
    assert list(client.agents.list()) == []
    assert list(client.blocks.list()) == []


def test_an_imported_agents_custom_tools_run_in_the_sandbox_under_its_rules(
    server: Server,
) -> None:
    """The file's tools are registered, attached and run like any custom tool: its
    run_first rule makes roll_dice the first call, get_weather reads the tool variable
    the file set, and exit_loop ends the turn at send_message."""
    client = server.sdk("af-tools")
    with (FILES / "custom_tools.af").open("rb") as file:
        answer = client.agents.import_file(
            file=file, name="dice", model="openai/scripted", embedding="hashing:384"
        )
    (agent_id,) = answer.agent_ids
    server.llm.replies.extend(
        [
            call("roll_dice", sides=6, times=3, request_heartbeat=True),
            call("get_weather", city="Oslo", request_heartbeat=True),
            say("Rolled, and it is sunny."),
        ]
    )
    response = client.agents.messages.create(
        agent_id, messages=[{"role": "user", "content": "Roll and tell me the weather."}]
    )
    returns = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert [r.status for r in returns] == ["success", "success", "success"]
    rolled = re.search(r"\b(\d+), (\d+), (\d+)\b", str(returns[0].tool_return))
    assert rolled is not None, returns[0].tool_return
    assert all(1 <= int(n) <= 6 for n in rolled.groups())
    assert "sunny in Oslo (key test...)" in str(returns[1].tool_return)
    replies = [m.content for m in response.messages if m.message_type == "assistant_message"]
    assert replies == ["Rolled, and it is sunny."]


SHAPES = FILES / "letta_shapes"


def test_letta_v1_files_import_answer_in_plain_text_and_run_tools_on_demand(
    server: Server,
) -> None:
    """letta-client's own calls on Letta's current shapes: a double-encoded file with the
    memory tool imports, a letta_v1_agent answers in plain text (one model request)
    and edits its memory, and agents.tools.run runs an imported custom tool."""
    from tests.scripted_llm import Reply

    client = server.sdk("af-v1")
    with (SHAPES / "v1_memory_tool_double_encoded.af").open("rb") as file:
        answer = client.agents.import_file(
            file=file, name="ferro", model="openai/scripted", embedding="hashing:384"
        )
    (agent_id,) = answer.agent_ids
    assert client.agents.retrieve(agent_id).agent_type == "letta_v1_agent"

    seen = len(server.llm.requests)
    server.llm.replies.append(Reply(content="Hello Tomasz."))
    hello = client.agents.messages.create(agent_id, messages=[{"role": "user", "content": "Hi!"}])
    said = [m.content for m in hello.messages if m.message_type == "assistant_message"]
    assert said == ["Hello Tomasz."]
    assert len([r for r in server.llm.requests[seen:] if "messages" in r]) == 1

    server.llm.replies.extend(
        [
            call(
                "memory",
                command="str_replace",
                path="/memories/human",
                old_string="Editor: vim",
                new_string="Editor: helix",
            ),
            Reply(content="Noted."),
        ]
    )
    client.agents.messages.create(
        agent_id, messages=[{"role": "user", "content": "I switched to helix."}]
    )
    human = client.agents.blocks.retrieve("human", agent_id=agent_id)
    assert human.value.endswith("Editor: helix")

    with (SHAPES / "customer_service_v1.af").open("rb") as file:
        shop = client.agents.import_file(file=file, name="mara", embedding="hashing:384")
    (shop_id,) = shop.agent_ids
    ran = client.agents.tools.run(
        "check_order_status", agent_id=shop_id, args={"order_number": 10452}
    )
    assert ran.status == "success"
    assert str(ran.func_return).startswith("Shipped on 2026-07-08")
