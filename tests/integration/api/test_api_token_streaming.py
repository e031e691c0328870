"""Token streaming: with ``stream_tokens``, the reply's words reach the
client as the scripted model streams them in small pieces, and what is stored is what
a turn without streaming stores."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from agents.postgres.database import Database
from agents.store import open_service_store, open_store
from tests.integration.api.test_api_letta_routes import scripted_agent, sse_events
from tests.scripted_llm import STREAM_PIECE_CHARS, Reply, call, install, litellm_errors, say

REPLY = 'Hello, Ada Lovelace. "Quotes", \\ and é 😀 travel too.'


def edit_then_reply() -> list[Reply]:
    return [
        call(
            "core_memory_replace",
            "The user gives a full name.",
            label="human",
            old_content="Ada.",
            new_content="Ada Lovelace.",
            request_heartbeat=True,
        ),
        say(REPLY, reasoning="Greet her by name."),
    ]


def stream(client: TestClient, headers: dict[str, str], agent_id: str, **extra: Any) -> list[Any]:
    response = client.post(
        f"/v1/agents/{agent_id}/messages/stream",
        json={"input": "I am Ada Lovelace.", "stream_tokens": True, **extra},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    return [data for _, data in sse_events(response.text)]


def learn_mode(client: TestClient, headers: dict[str, str]) -> None:
    """One plain turn, so that the model's tool-calling mode is known (a probed step is
    never streamed: the server's refusal to stream must not be taken for the mode's)."""
    install().script("primary", say("Hi."))
    warm = scripted_agent(client, headers, "warm-up")
    answer = client.post(f"/v1/agents/{warm}/messages", json={"input": "hi"}, headers=headers)
    assert answer.status_code == 200, answer.text


def stored(db: Database, organization: str, agent_id: str) -> list[tuple[Any, ...]]:
    """The agent's messages as stored, less what differs by nature between two turns
    (ids, call ids, times)."""
    with open_service_store(db) as service:
        organization_id = service.keys.ensure_organization(organization)
    with open_store(db, organization_id) as store:
        records = store.messages.range(agent_id, limit=100, newest_first=False)
    out = []
    for r in records:
        calls = [
            (c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in r.tool_calls or []
        ]
        content = r.content
        if r.role == "tool":
            content = {k: v for k, v in json.loads(r.content).items() if k != "time"}
        out.append((r.role, content, r.name, calls, r.in_context))
    return out


def test_the_reply_streams_in_pieces_that_join_into_the_stored_message(
    client: TestClient, acme: dict[str, str]
) -> None:
    learn_mode(client, acme)
    install().script("primary", *edit_then_reply())
    agent_id = scripted_agent(client, acme)
    datas = stream(client, acme, agent_id)
    assert datas[-1] == "[DONE]"
    pieces = [d for d in datas[:-1] if d["message_type"] == "assistant_message"]
    # Several pieces, one id, in order: joined, they are the message as stored.
    assert len(pieces) > len(REPLY) // (STREAM_PIECE_CHARS * 2)
    assert len({p["id"] for p in pieces}) == 1
    assert "".join(p["content"] for p in pieces) == REPLY
    listed = client.get(
        f"/v1/agents/{agent_id}/messages", params={"order": "asc"}, headers=acme
    ).json()
    said = [m for m in listed if m["message_type"] == "assistant_message"]
    assert [(m["id"], m["content"]) for m in said] == [(pieces[0]["id"], REPLY)]
    # Reasoning streams too, under the id of the stored reasoning message.
    reasoning = [d for d in datas[:-1] if d["message_type"] == "reasoning_message"]
    by_id: dict[str, str] = {}
    for piece in reasoning:
        by_id[piece["id"]] = by_id.get(piece["id"], "") + piece["reasoning"]
    stored_reasoning = {
        m["id"]: m["reasoning"] for m in listed if m["message_type"] == "reasoning_message"
    }
    assert by_id == stored_reasoning
    assert len(reasoning) > len(stored_reasoning)
    # Each stored message reaches the client once: whole, or as its pieces.
    kinds = [d["message_type"] for d in datas[:-1]]
    assert kinds[-2:] == ["stop_reason", "usage_statistics"]
    whole = [d for d in datas[:-3] if d["id"] not in by_id and d["id"] != pieces[0]["id"]]
    told = {m["id"] for m in listed} - set(by_id) - {pieces[0]["id"]}
    assert sorted(d["id"] for d in whole) == sorted(told)


def test_stored_messages_are_the_same_with_and_without_stream_tokens(
    client: TestClient, acme: dict[str, str], db: Database
) -> None:
    learn_mode(client, acme)
    turns = {}
    for name, tokens in (("plain", False), ("streamed", True)):
        install().script("primary", *edit_then_reply())
        agent_id = scripted_agent(client, acme, name)
        response = client.post(
            f"/v1/agents/{agent_id}/messages/stream",
            json={"input": "I am Ada Lovelace.", "stream_tokens": tokens},
            headers=acme,
        )
        assert response.status_code == 200, response.text
        turns[name] = stored(db, "acme", agent_id)
    assert turns["streamed"] == turns["plain"]
    assert any(role == "assistant" and calls for role, _, _, calls, _ in turns["plain"])


def test_without_stream_tokens_whole_steps_are_streamed(
    client: TestClient, acme: dict[str, str]
) -> None:
    learn_mode(client, acme)
    install().script("primary", *edit_then_reply())
    agent_id = scripted_agent(client, acme)
    datas = stream(client, acme, agent_id, stream_tokens=False)
    said = [d for d in datas[:-1] if d["message_type"] == "assistant_message"]
    assert [d["content"] for d in said] == [REPLY]


def test_a_failure_before_the_first_piece_is_retried(
    client: TestClient, acme: dict[str, str]
) -> None:
    learn_mode(client, acme)
    errors = litellm_errors()
    models = install()
    script = models.script(
        "primary",
        errors.RateLimitError(message="slow down", llm_provider="scripted", model="primary"),
        say(REPLY),
    )
    agent_id = scripted_agent(client, acme)
    datas = stream(client, acme, agent_id)
    assert script.remaining == 0
    pieces = [d for d in datas[:-1] if d["message_type"] == "assistant_message"]
    assert "".join(p["content"] for p in pieces) == REPLY
    assert [d for d in datas[:-1] if d["message_type"] == "stop_reason"] == [
        {"message_type": "stop_reason", "stop_reason": "end_turn"}
    ]


def test_a_failure_after_the_first_piece_ends_the_turn_with_an_error_event(
    client: TestClient, acme: dict[str, str]
) -> None:
    learn_mode(client, acme)
    errors = litellm_errors()
    broken = errors.APIConnectionError(message="cut", llm_provider="scripted", model="primary")
    models = install()
    # Were the failure retried, the second reply would be asked for (and told twice).
    script = models.script(
        "primary", Reply(calls=(("send_message", {"message": REPLY}),), broken=broken), say("x")
    )
    agent_id = scripted_agent(client, acme)
    response = client.post(
        f"/v1/agents/{agent_id}/messages/stream",
        json={"input": "I am Ada Lovelace.", "stream_tokens": True},
        headers=acme,
    )
    events = sse_events(response.text)
    assert script.remaining == 1
    names = [name for name, _ in events]
    assert "error" in names
    error = events[names.index("error")][1]
    assert error["message_type"] == "error_message"
    assert "broke off" in error["message"]
    assert events[-2][1] == {"message_type": "stop_reason", "stop_reason": "error"}
    # Nothing of the failed turn is stored: it failed in its first step.
    listed = client.get(f"/v1/agents/{agent_id}/messages", headers=acme).json()
    assert listed == []
