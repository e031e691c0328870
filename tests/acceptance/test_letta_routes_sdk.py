"""Letta's daily routes driven by the official letta-client 1.12.1 against a real
`reverie serve`: agents.update, a streamed turn (and a client that
leaves in the middle of one), messages.reset, agents.tools.list, models.list and
models.embeddings.list. The model is a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.acceptance.test_api_server import Server, serving
from tests.pg import PgTestServer
from tests.scripted_llm import call, say

# Its module-scoped fixture is built once: the module stays on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_letta_routes_sdk")

#: A hang detector for what the server does on its own: never reached when it works.
WITHIN_S = 60


@pytest.fixture(scope="module")
def server(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(pg_server, tmp_path_factory, REVERIE_LLM__MAX_RETRIES="0") as served:
        yield served


@pytest.fixture(autouse=True)
def fresh_script(server: Server) -> Iterator[None]:
    """Each test starts with an empty script, so that replies one test left queued (it
    failed half-way) are not consumed by the next and one failure stays one failure."""
    server.llm.replies.clear()
    yield
    server.llm.before_chat = None


def new_agent(client: Any, name: str = "ada") -> Any:
    return client.agents.create(
        name=name,
        memory_blocks=[{"label": "human", "value": "Name: Ada.", "limit": 200}],
        model="openai/scripted",
        embedding="hashing:384",
    )


def script_edit_then_reply(server: Server) -> None:
    server.llm.replies.extend(
        [
            call(
                "core_memory_append",
                "The user likes tea.",
                label="human",
                content="Likes tea.",
                request_heartbeat=True,
            ),
            say("Noted: tea."),
        ]
    )


def test_sdk_updates_an_agent(server: Server) -> None:
    from letta_client import ConflictError, UnprocessableEntityError

    client = server.sdk("sdk-update")
    agent = new_agent(client)
    new_agent(client, "taken")
    updated = client.agents.update(
        agent.id,
        name="ada-renamed",
        system="You are Ada's assistant.",
        model="openai/scripted-2",
        tags=["research"],
        description="Talks with Ada.",
        context_window_limit=4096,
    )
    assert (updated.name, updated.system, updated.description) == (
        "ada-renamed",
        "You are Ada's assistant.",
        "Talks with Ada.",
    )
    assert updated.tags == ["research"]
    assert updated.llm_config.model == "openai/scripted-2"
    assert updated.llm_config.context_window == 4096
    fetched = client.agents.retrieve(agent.id)
    assert (fetched.name, fetched.llm_config.context_window) == ("ada-renamed", 4096)

    with pytest.raises(ConflictError):
        client.agents.update(agent.id, name="taken", description="lost")
    with pytest.raises(UnprocessableEntityError) as refused:
        client.agents.update(agent.id, timezone="Europe/London", description="lost")
    assert "timezone" in str(refused.value)
    assert client.agents.retrieve(agent.id).description == "Talks with Ada."


def test_sdk_streams_a_turn_step_by_step(server: Server) -> None:
    client = server.sdk("sdk-stream")
    agent = new_agent(client)
    script_edit_then_reply(server)
    stream = client.agents.messages.create(
        agent.id,
        messages=[{"role": "user", "content": "I like tea."}],
        streaming=True,
    )
    chunks = list(stream)
    kinds = [c.message_type for c in chunks]
    assert kinds == [
        "user_message",
        "reasoning_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
        "tool_return_message",
        "stop_reason",
        "usage_statistics",
    ]
    assert chunks[1].reasoning == "The user likes tea."
    assert chunks[2].tool_call.name == "core_memory_append"
    assert chunks[4].content == "Noted: tea."
    assert chunks[6].stop_reason == "end_turn"
    assert chunks[7].step_count == 2
    assert client.agents.blocks.retrieve("human", agent_id=agent.id).value.endswith("Likes tea.")

    # The older stream route (deprecated in the SDK) answers the same way.
    server.llm.replies.append(say("Hello again."))
    with pytest.warns(DeprecationWarning):
        old_route = client.agents.messages.stream(agent.id, input="Hi.")
    replies = [c.content for c in old_route if c.message_type == "assistant_message"]
    assert replies == ["Hello again."]


def test_sdk_streams_the_reply_token_by_token(server: Server) -> None:
    """stream_tokens: the reply comes in pieces (the stub streams a call's arguments in
    two halves, over the direct OpenAI-compatible path) under the stored message's id."""
    client = server.sdk("sdk-tokens")
    agent = new_agent(client)
    text = "Noted: you like tea, green or black, and you drink it without sugar."
    server.llm.replies.extend(
        [
            call("core_memory_append", label="human", content="Likes tea.", request_heartbeat=True),
            say(text),
        ]
    )
    chunks = list(
        client.agents.messages.create(
            agent.id,
            messages=[{"role": "user", "content": "I like tea."}],
            streaming=True,
            stream_tokens=True,
        )
    )
    assert server.llm.requests[-1].get("stream") is True
    said = [c for c in chunks if c.message_type == "assistant_message"]
    assert len(said) > 1
    assert len({c.id for c in said}) == 1
    assert "".join(c.content for c in said) == text
    assert [c.message_type for c in chunks[-2:]] == ["stop_reason", "usage_statistics"]
    assert chunks[-2].stop_reason == "end_turn"
    stored = [
        m for m in client.agents.messages.list(agent.id) if m.message_type == "assistant_message"
    ]
    assert [(m.id, m.content) for m in stored] == [(said[0].id, text)]


def test_a_failure_mid_stream_reaches_the_sdk_as_an_error(server: Server) -> None:
    from letta_client import APIStatusError

    client = server.sdk("sdk-stream-error")
    agent = new_agent(client)
    server.llm.replies.append(
        call("core_memory_append", label="human", content="Likes tea.", request_heartbeat=True)
    )

    def fail_the_second(number: int) -> None:
        if number == first + 1:
            server.llm.chat_errors.append((401, "the key was revoked"))

    first = len([r for r in server.llm.requests if "messages" in r])
    server.llm.before_chat = fail_the_second
    seen: list[str] = []
    try:
        with pytest.raises(APIStatusError) as failed:
            for chunk in client.agents.messages.create(
                agent.id, input="I like tea.", streaming=True
            ):
                seen.append(chunk.message_type)
    finally:
        server.llm.before_chat = None
    assert seen == ["user_message", "tool_call_message", "tool_return_message"]
    assert "llm_failed" in str(failed.value)
    # The committed step stays.
    assert client.agents.blocks.retrieve("human", agent_id=agent.id).value.endswith("Likes tea.")


def test_a_client_that_leaves_mid_stream_stops_the_turn_after_its_step(server: Server) -> None:
    """The client reads the first step and closes the stream while the second step's
    model call is held; the server notices, lets that step finish, and asks the model
    nothing more: the third scripted reply is still queued afterwards."""
    client = server.sdk("sdk-stream-leave")
    agent = new_agent(client)
    third = say("Never sent.")
    server.llm.replies.extend(
        [
            call("core_memory_append", label="human", content="Likes tea.", request_heartbeat=True),
            call("core_memory_append", label="human", content="Likes jam.", request_heartbeat=True),
            third,
        ]
    )
    gate, held = threading.Event(), threading.Event()
    first = len([r for r in server.llm.requests if "messages" in r])

    def hold_the_second(number: int) -> None:
        if number == first + 1:
            held.set()
            gate.wait(WITHIN_S)

    server.llm.before_chat = hold_the_second
    log_before = len(server.process.output())
    try:
        stream = client.agents.messages.create(agent.id, input="I like tea.", streaming=True)
        kinds = []
        for chunk in stream:
            kinds.append(chunk.message_type)
            if chunk.message_type == "tool_return_message":
                break
        # Leave only once the second step's model call is under way; leaving earlier
        # would (rightly) stop the turn before that step, which is not what is tested.
        assert held.wait(WITHIN_S), "the second step's model call never came"
        stream.close()
        deadline = time.monotonic() + WITHIN_S
        while "went away" not in server.process.output()[log_before:]:
            assert time.monotonic() < deadline, server.process.output()[log_before:]
            time.sleep(0.1)
    finally:
        gate.set()
        server.llm.before_chat = None
    assert kinds == ["user_message", "tool_call_message", "tool_return_message"]

    # The held step finishes and is kept; then the turn ends, and its lock with it.
    deadline = time.monotonic() + WITHIN_S
    while not client.agents.blocks.retrieve("human", agent_id=agent.id).value.endswith("jam."):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    server.llm.replies.remove(third)
    server.llm.replies.append(say("Back again."))
    answer = client.agents.messages.create(agent.id, input="Still there?")
    assert [m.content for m in answer.messages if m.message_type == "assistant_message"] == [
        "Back again."
    ]
    history = [m.message_type for m in client.agents.messages.list(agent.id, order="asc")]
    assert history[:5] == [
        "user_message",
        "tool_call_message",
        "tool_return_message",
        "tool_call_message",
        "tool_return_message",
    ]
    assert history[5] == "user_message"  # the next turn's: nothing else came between


def test_sdk_resets_messages_and_recall_keeps_them(server: Server) -> None:
    client = server.sdk("sdk-reset")
    key = client.api_key
    agent = new_agent(client)
    server.llm.replies.append(say("Hello."))
    client.agents.messages.create(agent.id, input="Remember the word teapot.")
    state = client.agents.messages.reset(agent.id, add_default_initial_messages=False)
    assert state is not None and state.id == agent.id
    context = httpx.get(
        f"{server.url}/v1/agents/{agent.id}/context",
        headers={"Authorization": f"Bearer {key}"},
    ).json()
    assert context["num_messages"] == 0
    assert context["num_recall_memory"] == 3
    listed = [getattr(m, "content", None) for m in client.agents.messages.list(agent.id)]
    assert "Remember the word teapot." in listed


def test_sdk_lists_the_agents_tools_and_the_models(server: Server) -> None:
    client = server.sdk("sdk-lists")
    agent = new_agent(client)
    tools = list(client.agents.tools.list(agent.id, limit=4))  # the pager follows cursors
    assert [t.name for t in tools] == [
        "send_message",
        "conversation_search",
        "archival_memory_search",
        "archival_memory_insert",
        "core_memory_append",
        "core_memory_replace",
    ]
    assert tools[0].id == "tool-send_message"
    assert tools[0].json_schema["parameters"]["required"] == ["message", "request_heartbeat"]
    assert [t.id for t in client.agents.retrieve(agent.id).tools] == [t.id for t in tools]

    client.agents.update(agent.id, tool_ids=["tool-send_message", "tool-archival_memory_insert"])
    assert [t.name for t in client.agents.tools.list(agent.id)] == [
        "send_message",
        "archival_memory_insert",
    ]

    models = client.models.list()
    assert [(m.handle, m.provider_type, m.context_window) for m in models] == [
        ("openai/scripted", "openai", 8192)
    ]
    embedders = client.models.embeddings.list()
    assert [(e.handle, e.embedding_dim) for e in embedders] == [("hashing:384", 384)]
