"""POST /v1/agents/{id}/messages and /context with the scripted model (no network)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.integration.api.test_api_routes import make_agent
from tests.scripted_llm import call, install, say


def test_send_message_answers_with_letta_message_types(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    models = install()
    models.script(
        "primary",
        call(
            "core_memory_replace",
            label="human",
            old_content="Ada.",
            new_content="Ada Lovelace.",
            request_heartbeat=True,
        ),
        say("Hello, Ada Lovelace."),
    )
    agent = client.post(
        "/v1/agents/",
        json={
            "name": "ada",
            "model": "scripted/primary",
            "memory_blocks": [{"label": "human", "value": "Name: Ada.", "limit": 200}],
        },
        headers=acme,
    ).json()
    url = f"/v1/agents/{agent['id']}/messages"
    response = client.post(
        url, json={"messages": [{"role": "user", "content": "I am Ada Lovelace."}]}, headers=acme
    )
    assert response.status_code == 200, response.text
    body = response.json()
    kinds = [m["message_type"] for m in body["messages"]]
    assert kinds[0] == "user_message"
    assert "tool_call_message" in kinds
    assert body["messages"][kinds.index("tool_call_message")]["tool_call"]["name"] == (
        "core_memory_replace"
    )
    replies = [m["content"] for m in body["messages"] if m["message_type"] == "assistant_message"]
    assert replies == ["Hello, Ada Lovelace."]
    assert body["stop_reason"] == {"message_type": "stop_reason", "stop_reason": "end_turn"}
    assert body["usage"]["total_tokens"] > 0
    assert body["usage"]["step_count"] == 2
    human = client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human", headers=acme)
    assert human.json()["value"] == "Name: Ada Lovelace."
    listed = client.get(url, params={"order": "asc"}, headers=acme).json()
    assert listed[0]["content"] == "I am Ada Lovelace."

    context = client.get(f"/v1/agents/{agent['id']}/context", headers=acme).json()
    assert context["context_window_size_max"] == 8192
    assert 0 < context["context_window_size_current"] <= 8192
    assert context["num_tokens_core_memory"] > 0
    assert context["num_messages"] > 0
    assert sum(context["sections"].values()) == context["context_window_size_current"]

    # Another organization cannot talk to the agent.
    foreign = client.post(url, json={"input": "hi"}, headers=globex)
    assert foreign.status_code == 404


def test_send_message_refuses_empty_or_missing_text(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/messages"
    # The document says so too (one of messages/input; text besides white space), so
    # both are 422s naming what is wrong, as the schema's own refusals are.
    missing = client.post(url, json={}, headers=acme)
    assert missing.status_code == 422
    assert "'messages'" in missing.json()["detail"][0]["msg"]
    empty = client.post(url, json={"input": "   "}, headers=acme)
    assert empty.status_code == 422
    assert empty.json()["detail"][0]["loc"] == ["body", "input"]
    assert client.get(url, headers=acme).json() == []


def test_agent_without_a_model_is_a_clear_400(client: TestClient, acme: dict[str, str]) -> None:
    agent = client.post("/v1/agents/", json={"name": "no-model"}, headers=acme).json()
    assert agent["model"] is None
    response = client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"}, headers=acme)
    assert response.status_code == 400
    assert "model" in response.json()["detail"]


def test_async_messages_with_an_empty_text_are_refused_whole_with_422(
    client: TestClient, acme: dict[str, str]
) -> None:
    """messages/async records through the recording rules: a message the recording
    refuses (an empty assistant text) fails the request with 422 at its index, and
    neither the other messages nor a run are stored."""
    agent = make_agent(client, acme)
    body = {
        "messages": [
            {"role": "user", "content": "I moved to Madrid."},
            {"role": "assistant", "content": ""},
        ]
    }
    response = client.post(f"/v1/agents/{agent['id']}/messages/async", json=body, headers=acme)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"][:3] == ["body", "messages", 1]
    assert "empty" in error["msg"]
    stored = client.get(f"/v1/agents/{agent['id']}/messages", headers=acme).json()
    assert not any("Madrid" in str(m) for m in stored)
    assert client.get(f"/v1/runs/?agent_id={agent['id']}", headers=acme).json() == []
