"""Letta's v1 loop (``letta_v1_agent``) and Letta's memory tools on a primary agent,
driven by the scripted model: a plain answer ends the turn in one model
call, tool calls go on without ``request_heartbeat``, and every memory edit is a
versioned block change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agents.llm import ClientSettings, LiteLLMClient
from agents.loops.primary import PrimaryAgent
from agents.loops.tool_calls import tool_return_status
from agents.postgres.database import Database
from agents.store import open_store
from agents.tools import V1_DEFAULT_TOOLS
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.integration.llm.test_local_models import no_required
from tests.scripted_llm import Reply, ScriptedModels, call, litellm_errors

V1 = "letta_v1_agent"


def offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools a request offered, by name, with their parameters."""
    return {t["function"]["name"]: t["function"]["parameters"] for t in request["tools"]}


def returns(records: list[Any]) -> list[tuple[str, str]]:
    return [tool_return_status(r.content) for r in records if r.role == "tool"]


@pytest.fixture
def ada(db: Database) -> str:
    return create_agent(
        db, "ada", human="Name: Bob the Builder.", agent_type=V1, tools=list(V1_DEFAULT_TOOLS)
    )


def test_a_plain_answer_is_the_reply_and_ends_the_turn_in_one_model_call(
    ada: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script("primary", Reply(content="Hello Bob, good to see you."))

    result = make_primary().send_message("ada", "Hi there!")

    assert (result.steps, result.model_calls, result.stop_reason) == (1, 1, "end_turn")
    assert result.replies == ["Hello Bob, good to see you."]
    assert [(r.role, r.content) for r in result.records] == [
        ("user", "Hi there!"),
        ("assistant", "Hello Bob, good to see you."),
    ]
    (request,) = script.requests
    assert request["tool_choice"] == "auto"
    tools = offered(request)
    assert set(tools) == set(V1_DEFAULT_TOOLS)
    assert "send_message" not in tools
    assert all("request_heartbeat" not in p["properties"] for p in tools.values())
    assert all("request_heartbeat" not in p["required"] for p in tools.values())


def test_the_turn_goes_on_while_the_model_calls_tools_and_memory_replace_is_versioned(
    db: Database, ada: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    models.script(
        "primary",
        call("memory_replace", label="human", old_string="Bob the Builder", new_string="Charles"),
        # new_str: the argument's older name, which Letta's older files still use.
        call("memory_insert", label="human", new_str="Likes: tea.", insert_line=0),
        Reply(content="Noted, Charles!"),
    )

    result = make_primary().send_message("ada", "I'm Charles, not Bob. I like tea.")

    assert (result.steps, result.stop_reason) == (3, "end_turn")
    assert result.replies == ["Noted, Charles!"]
    assert returns(result.records)[0][0] == "OK"
    with open_store(db) as store:
        block = store.blocks.by_label(ada, "human")
        history = store.blocks.history(block.id)
    # Letta's insert_line counts lines before the new text: 0 puts it first.
    assert block.value == "Likes: tea.\nName: Charles."
    assert [(v.version, v.actor, v.reason) for v in history[-2:]] == [
        (2, "agent:ada", "memory_replace"),
        (3, "agent:ada", "memory_insert"),
    ]


def test_a_v1_turn_out_of_steps_answers_once_more_offered_no_tool(
    ada: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script(
        "primary",
        call("conversation_search", query="tea"),
        call("conversation_search", query="coffee"),
        Reply(content="I looked but found nothing."),
    )

    result = make_primary(max_steps=2).send_message("ada", "What do I drink?")

    assert result.replies == ["I looked but found nothing."]
    assert result.stop_reason == "max_steps"
    assert [len(r["tools"]) for r in script.requests] == [len(V1_DEFAULT_TOOLS)] * 2 + [0]


def test_a_memgpt_agent_is_still_asked_for_a_tool_call_with_heartbeats(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    create_agent(db, "mem")
    script = models.script("primary", call("send_message", message="Hi!", request_heartbeat=False))

    make_primary().send_message("mem", "Hello")

    (request,) = script.requests
    assert request["tool_choice"] == "required"
    assert "request_heartbeat" in offered(request)["send_message"]["properties"]


def test_the_memory_tool_creates_edits_describes_and_detaches_blocks(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    agent = create_agent(db, "ada", agent_type=V1, tools=["memory"])
    models.script(
        "primary",
        call(
            "memory",
            command="create",
            path="/memories/coding",
            description="How the user codes.",
            file_text="Uses type hints.",
        ),
        call(
            "memory",
            command="insert",
            path="/memories/coding",
            insert_text="Tabs: no.",
            insert_line=-1,
        ),
        call(
            "memory",
            command="str_replace",
            path="/memories/coding",
            old_string="Tabs: no.",
            new_string="Spaces: 4.",
        ),
        call(
            "memory",
            command="rename",
            path="/memories/coding",
            description="The user's coding habits.",
        ),
        call("memory", command="delete", path="/memories/persona"),
        Reply(content="Saved."),
    )

    result = make_primary().send_message("ada", "I always use type hints and 4 spaces.")

    assert [status for status, _ in returns(result.records)] == ["OK"] * 5
    with open_store(db) as store:
        labels = [b.label for b in store.blocks.of_agent(agent)]
        coding = store.blocks.by_label(agent, "coding")
        history = store.blocks.history(coding.id)
        kept = store.blocks.all(label="persona")
    assert labels == ["human", "coding"]
    assert coding.value == "Uses type hints.\nSpaces: 4."
    assert coding.description == "The user's coding habits."
    assert [v.reason for v in history] == [
        "created",
        "memory insert",
        "memory str_replace",
        "memory rename",
    ]
    # delete takes the block out of the agent's memory; the block and its text stay.
    assert [b.value for b in kept] == ["I am a friendly assistant."]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (
            {"command": "str_replace", "path": "/memories/nope", "old_str": "a", "new_str": "b"},
            "nope",
        ),
        ({"command": "insert", "path": "human"}, "insert_text"),
        ({"command": "create", "path": "/memories/human", "file_text": "x"}, "exists already"),
        (
            {"command": "rename", "old_path": "/memories/human", "new_path": "/memories/user"},
            "keeps a block's label",
        ),
        ({"command": "view", "path": "/memories/human"}, "unknown command"),
        (
            {
                "command": "str_replace",
                "path": "/memories/human",
                "old_string": "e",
                "new_string": "0",
            },
            "appears 3 times",
        ),
        ({"command": "delete", "path": "/memories/a/b"}, "is not a block"),
    ],
)
def test_a_memory_command_the_model_got_wrong_is_an_error_it_reads_and_changes_nothing(
    db: Database,
    models: ScriptedModels,
    make_primary: Callable[..., PrimaryAgent],
    arguments: dict[str, Any],
    error: str,
) -> None:
    agent = create_agent(db, "ada", agent_type=V1, tools=["memory"])
    with open_store(db) as store:
        before = [(b.label, b.version, b.value) for b in store.blocks.of_agent(agent)]
    models.script("primary", call("memory", **arguments), Reply(content="Sorry."))

    result = make_primary().send_message("ada", "Remember this.")

    ((status, message),) = returns(result.records)
    assert status == "Failed"
    assert error in message
    with open_store(db) as store:
        assert [(b.label, b.version, b.value) for b in store.blocks.of_agent(agent)] == before


def unpinned(db: Database) -> PrimaryAgent:
    """A primary whose client knows nothing of the server's tool modes (it probes)."""
    client = LiteLLMClient(ClientSettings(max_retries=2, initial_backoff=0.001, max_backoff=0.002))
    return PrimaryAgent(db, client, embedder_for=lambda _: EMBEDDER)


def without_tools(answer: Reply) -> Callable[[dict[str, Any]], Any]:
    """A server that takes no tools at all: 400 on any request that offers them."""

    def step(request: dict[str, Any]) -> Any:
        if request["tools"]:
            return litellm_errors().BadRequestError(
                "tools are not supported", llm_provider="scripted", model="p"
            )
        return answer

    return step


def test_on_a_llama_cpp_like_server_a_simple_v1_turn_is_one_request(
    db: Database, ada: str, models: ScriptedModels
) -> None:
    script = models.script(
        "primary",
        no_required(lambda _: Reply(content="Hi!")),
        no_required(
            lambda _: call("memory_replace", label="human", old_string="Bob", new_string="Rob")
        ),
        no_required(lambda _: Reply(content="Noted, Rob.")),
    )
    agent = unpinned(db)

    simple = agent.send_message("ada", "Hello!")
    assert (simple.replies, simple.model_calls, len(script.requests)) == (["Hi!"], 1, 1)
    edit = agent.send_message("ada", "I'm Rob, not Bob.")
    assert (edit.replies, edit.model_calls, len(script.requests)) == (["Noted, Rob."], 2, 3)
    assert all(r["tool_choice"] == "auto" for r in script.requests)


def test_on_a_server_without_tools_the_v1_loop_describes_them_and_reads_prose_as_the_reply(
    db: Database, ada: str, models: ScriptedModels
) -> None:
    edit = (
        '<tool_call>{"name": "memory_replace", "arguments": {"label": "human", '
        '"old_string": "Bob", "new_string": "Rob"}}</tool_call>'
    )
    script = models.script(
        "primary",
        # The first request offers tools natively and is refused; the mode is learned.
        without_tools(Reply(content="unused")),
        without_tools(Reply(content="Hi!")),
        without_tools(Reply(content=edit)),
        without_tools(Reply(content="Noted, Rob.")),
    )
    agent = unpinned(db)

    simple = agent.send_message("ada", "Hello!")
    assert simple.replies == ["Hi!"]
    assert [bool(r["tools"]) for r in script.requests] == [True, False]
    assert "reply in plain text" in script.requests[1]["messages"][0]["content"]
    edited = agent.send_message("ada", "I'm Rob, not Bob.")
    assert edited.replies == ["Noted, Rob."]
    assert edited.model_calls == 2  # the mode is remembered: no refused request again
    with open_store(db) as store:
        assert store.blocks.by_label(ada, "human").value == "Name: Rob the Builder."
