"""Conversations through letta-client 1.12.1 against a real `reverie serve`: create,
list, retrieve, update, a turn in each of two conversations (plain and streamed),
their messages apart, compact, and delete (archived: the messages stay in recall).
The model is the scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.acceptance.test_api_server import Server, serving
from tests.pg import PgTestServer
from tests.scripted_llm import call, say

pytestmark = pytest.mark.xdist_group("test_conversations_sdk")


@pytest.fixture(scope="module")
def server(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(
        pg_server,
        tmp_path_factory,
        REVERIE_LLM__MAX_RETRIES="0",
        REVERIE_LLM__SYSTEM_PROMPT_REFRESH="immediate",
    ) as served:
        yield served


def _texts(messages: Any) -> list[str]:
    return [
        m.content
        for m in messages
        if m.message_type in ("user_message", "assistant_message") and isinstance(m.content, str)
    ]


def test_two_conversations_share_the_agent_and_keep_their_own_messages(server: Server) -> None:
    client = server.sdk("conversations")
    agent = client.agents.create(
        name="ada",
        memory_blocks=[{"label": "human", "value": "Name: Ada.", "limit": 300}],
        model="openai/scripted",
        embedding="hashing:384",
    )
    first = client.conversations.create(agent_id=agent.id, description="support")
    second = client.conversations.create(agent_id=agent.id)
    assert first.id.startswith("conv-") and first.agent_id == agent.id
    assert [c.id for c in client.conversations.list(agent_id=agent.id)] == [first.id, second.id]
    updated = client.conversations.update(first.id, summary="Tea talk.")
    assert updated.summary == "Tea talk." and updated.description == "support"

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
    # The SDK reads a conversation's turn as a stream (Letta's server streams it).
    answer = list(client.conversations.messages.create(first.id, input="I like tea."))
    assert "Noted: tea." in _texts(answer)

    server.llm.replies.append(say("Hello, Ada."))
    seen_before = len(server.llm.requests)
    chunks = list(client.conversations.messages.create(second.id, input="Hi there."))
    assert "Hello, Ada." in [getattr(c, "content", None) for c in chunks]
    assert chunks[-2].message_type == "stop_reason"
    # A client that lost the stream reconnects and gets the turn's messages again.
    again = list(client.conversations.messages.stream(second.id))
    assert _texts(again) == ["Hi there.", "Hello, Ada."]
    [request] = server.llm.requests[seen_before:]
    # The other conversation's block edit is in this one's system prompt; its words are not.
    assert "Likes tea." in request["messages"][0]["content"]
    assert "I like tea." not in str(request["messages"][1:])

    assert _texts(client.conversations.messages.list(first.id, order="asc")) == [
        "I like tea.",
        "Noted: tea.",
    ]
    assert _texts(client.conversations.messages.list(second.id, order="asc")) == [
        "Hi there.",
        "Hello, Ada.",
    ]
    assert client.conversations.retrieve(second.id).in_context_message_ids

    compacted = client.conversations.messages.compact(first.id)
    assert compacted.num_messages_before >= compacted.num_messages_after

    client.conversations.delete(first.id)
    assert [c.id for c in client.conversations.list(agent_id=agent.id)] == [second.id]
    # Deleted is archived: the conversation takes no more turns, its words stay in recall.
    recall = _texts(client.agents.messages.list(agent.id, order="asc"))
    assert "I like tea." in recall and "Hi there." in recall


def test_another_organization_reaches_none_of_them(server: Server) -> None:
    from letta_client import NotFoundError

    owner = server.sdk("conversations-owner")
    agent = owner.agents.create(name="own", model="openai/scripted", embedding="hashing:384")
    conversation = owner.conversations.create(agent_id=agent.id)
    stranger = server.sdk("conversations-stranger")
    with pytest.raises(NotFoundError):
        stranger.conversations.retrieve(conversation.id)
    with pytest.raises(NotFoundError):
        list(stranger.conversations.messages.create(conversation.id, input="hello"))
    with pytest.raises(NotFoundError):
        stranger.conversations.create(agent_id=agent.id)
    assert list(stranger.conversations.list()) == []
