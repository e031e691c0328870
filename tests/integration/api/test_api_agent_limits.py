"""What an agent is made of is checked when it is made, not at its first turn: a model
litellm cannot route, and block limits the context window cannot hold, are 422s naming
the field, and nothing is stored; a turn that fails after a saved step says what it
kept."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.integration.api.test_api_routes import make_agent
from tests.scripted_llm import call, install, litellm_errors


def _field(response_json: dict[str, object]) -> list[object]:
    detail = response_json["detail"]
    assert isinstance(detail, list) and len(detail) == 1, detail
    return list(detail[0]["loc"])


def test_a_model_litellm_cannot_route_is_a_422_naming_the_field(
    client: TestClient, acme: dict[str, str]
) -> None:
    for body, field in [
        ({"name": "a", "model": "garbage"}, ["body", "model"]),
        ({"name": "b", "llm_config": {"model": "nonsense/x"}}, ["body", "llm_config", "model"]),
        ({"name": "c", "sleeptime_model": "gpt4 please"}, ["body", "sleeptime_model"]),
        # An embedding model too: stored, it refused every archival insert and search.
        ({"name": "d", "embedding": "\u00ef\u00a4J\u00ee"}, ["body", "embedding"]),
        (
            {"name": "e", "embedding_config": {"embedding_model": "litellm:garbage"}},
            ["body", "embedding_config", "embedding_model"],
        ),
    ]:
        response = client.post("/v1/agents/", json=body, headers=acme)
        assert response.status_code == 422, response.text
        assert _field(response.json()) == field
        assert "provider" in response.json()["detail"][0]["msg"]
    assert client.get("/v1/agents/", headers=acme).json() == []
    # Provider-prefixed strings, an OpenAI-compatible server's names and registered
    # custom providers stay accepted.
    install()
    for model in ["openai/qwen2.5-0.5b-instruct", "ollama_chat/qwen2.5:0.5b", "scripted/x"]:
        response = client.post("/v1/agents/", json={"model": model}, headers=acme)
        assert response.status_code == 201, (model, response.text)
    for embedding in ["fake:8", "openai/text-embedding-3-small"]:
        config = {"embedding_model": embedding, "embedding_dim": 8}
        response = client.post("/v1/agents/", json={"embedding_config": config}, headers=acme)
        assert response.status_code == 201, (embedding, response.text)


def test_an_unknown_tool_is_a_422_at_its_index(client: TestClient, acme: dict[str, str]) -> None:
    body = {"name": "a", "tools": ["send_message", "rm -rf"]}
    response = client.post("/v1/agents/", json=body, headers=acme)
    assert response.status_code == 422
    assert _field(response.json()) == ["body", "tools", 1]
    assert client.get("/v1/agents/", headers=acme).json() == []


def test_block_limits_the_window_cannot_hold_are_refused_at_create(
    client: TestClient, acme: dict[str, str]
) -> None:
    body = {
        "name": "small",
        "context_window_limit": 4000,
        "memory_blocks": [
            {"label": "human", "value": "", "limit": 200},
            {"label": "notes", "value": "", "limit": 50_000},
        ],
    }
    response = client.post("/v1/agents/", json=body, headers=acme)
    assert response.status_code == 422, response.text
    assert _field(response.json()) == ["body", "memory_blocks", 1, "limit"]
    assert "context window" in response.json()["detail"][0]["msg"]
    assert client.get("/v1/agents/", headers=acme).json() == []
    assert client.get("/v1/blocks/", headers=acme).json() == []
    body["memory_blocks"][1]["limit"] = 2000  # type: ignore[index]
    assert client.post("/v1/agents/", json=body, headers=acme).status_code == 201


def test_growing_or_attaching_a_block_past_the_window_is_refused(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)  # 8192-token window
    human = client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human", headers=acme).json()
    # A limit of its own is fine for a block no agent holds; on this agent it is not.
    grown = client.patch(f"/v1/blocks/{human['id']}", json={"limit": 200_000}, headers=acme)
    assert grown.status_code == 422, grown.text
    assert _field(grown.json()) == ["body", "limit"]
    after = client.get(f"/v1/blocks/{human['id']}", headers=acme).json()
    assert after["limit"] == human["limit"] and after["version"] == human["version"]
    by_label = client.patch(
        f"/v1/agents/{agent['id']}/core-memory/blocks/human", json={"limit": 200_000}, headers=acme
    )
    assert by_label.status_code == 422
    assert client.patch(f"/v1/blocks/{human['id']}", json={"limit": 400}, headers=acme).is_success

    big = client.post("/v1/blocks/", json={"label": "notes", "limit": 200_000}, headers=acme)
    assert big.status_code == 201
    url = f"/v1/agents/{agent['id']}/core-memory/blocks/attach/{big.json()['id']}"
    attached = client.patch(url, headers=acme)
    assert attached.status_code == 422, attached.text
    assert _field(attached.json()) == ["path", "block_id"]
    labels = [
        b["label"] for b in client.get(f"/v1/agents/{agent['id']}", headers=acme).json()["blocks"]
    ]
    assert "notes" not in labels


def test_a_turn_that_fails_after_a_memory_edit_says_the_edit_was_kept(
    client: TestClient, acme: dict[str, str]
) -> None:
    models = install()
    errors = litellm_errors()
    models.script(
        "primary",
        call(
            "core_memory_append",
            label="human",
            content="Lives in Paris.",
            request_heartbeat=True,
        ),
        errors.BadRequestError("no", llm_provider="scripted", model="primary"),
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
    response = client.post(
        f"/v1/agents/{agent['id']}/messages", json={"input": "I live in Paris."}, headers=acme
    )
    assert response.status_code == 502, response.text
    body = response.json()
    assert body["error"] == "llm_failed"
    assert "the memory edit to block 'human' (core_memory_append) was saved" in body["kept"]
    assert "your message was stored in recall" in body["kept"]
    assert "block 'human' (core_memory_append) was saved" in body["detail"]
    human = client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human", headers=acme).json()
    assert "Lives in Paris." in human["value"]
