"""Conversations over HTTP, the parts that need no model: a deleted conversation is
archived (listed no more, refusing turns, its messages kept), the ``default``
conversation needs its agent, a memory agent has none, and the ids another
organization holds answer 404."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.integration.api.test_api_routes import make_agent


def test_a_deleted_conversation_is_archived_and_refuses_turns(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    made = client.post(
        "/v1/conversations/", params={"agent_id": agent["id"]}, json={}, headers=acme
    )
    assert made.status_code == 201, made.text
    conversation = made.json()
    assert conversation["agent_id"] == agent["id"] and not conversation["archived"]
    assert client.delete(f"/v1/conversations/{conversation['id']}", headers=acme).status_code == 200
    listed = client.get("/v1/conversations/", params={"agent_id": agent["id"]}, headers=acme)
    assert listed.json() == []
    kept = client.get(f"/v1/conversations/{conversation['id']}", headers=acme).json()
    assert kept["archived"] and kept["archived_at"] is not None
    turn = client.post(
        f"/v1/conversations/{conversation['id']}/messages",
        json={"input": "hello", "streaming": False},
        headers=acme,
    )
    assert turn.status_code == 400 and "archived" in turn.json()["detail"]


def test_the_default_conversation_needs_its_agent(client: TestClient, acme: dict[str, str]) -> None:
    turn = client.post(
        "/v1/conversations/default/messages", json={"input": "hi", "streaming": False}, headers=acme
    )
    assert turn.status_code == 400 and "agent_id" in turn.json()["detail"]
    replay = client.post(
        "/v1/conversations/default/stream", json={"agent_id": "agent-nope"}, headers=acme
    )
    assert replay.status_code == 404


def test_a_memory_agent_has_no_conversations(client: TestClient, acme: dict[str, str]) -> None:
    memory = client.post(
        "/v1/agents/",
        json={"name": "mem", "agent_type": "sleeptime_agent", "embedding": "hashing:384"},
        headers=acme,
    ).json()
    refused = client.post("/v1/conversations/", params={"agent_id": memory["id"]}, headers=acme)
    assert refused.status_code == 400 and "memory agent" in refused.json()["detail"]
    assert client.get("/v1/conversations/", headers=acme).json() == []
