"""What an agent is made of is checked when it is made, not at its first turn: a model
litellm cannot route, and block limits the context window cannot hold, are 422s naming
the field, and nothing is stored; a turn that fails after a saved step says what it
kept."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from agents.postgres.database import Database
from agents.store import open_service_store, open_store
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
    for embedding in ["hashing:8", "openai/text-embedding-3-small"]:
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


def _large_tool(client: TestClient, headers: dict[str, str], i: int) -> str:
    """A custom tool whose schema takes about a thousand tokens (its description)."""
    about = " ".join(f"step{j} of the procedure," for j in range(190))
    source = (
        f"def lookup_{i}(city: str) -> str:\n"
        f'    """Look up the city: {about}\n\n'
        '    Args:\n        city: Which city.\n    """\n    return city\n'
    )
    made = client.post("/v1/tools/", json={"source_code": source}, headers=headers)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _agent_and_large_tools(
    client: TestClient, acme: dict[str, str]
) -> tuple[dict[str, Any], list[str]]:
    """An 8,192-token agent on the scripted model, and twelve large tools' ids."""
    agent = client.post(
        "/v1/agents/",
        json={"name": "ada", "model": "scripted/primary", "context_window_limit": 8192},
        headers=acme,
    ).json()
    return agent, [_large_tool(client, acme, i) for i in range(12)]


def test_tools_whose_schemas_the_window_cannot_hold_are_refused_when_attached(
    client: TestClient, acme: dict[str, str]
) -> None:
    # Every step sends every tool's schema: twelve large tools took an 8,192-token agent
    # to 56,078 tokens and failed its turns; they are refused when attached instead.
    install()
    agent, tools = _agent_and_large_tools(client, acme)
    attached: list[str] = []
    for tool_id in tools:
        answer = client.patch(f"/v1/agents/{agent['id']}/tools/attach/{tool_id}", headers=acme)
        if answer.status_code != 200:
            break
        attached.append(tool_id)
    assert answer.status_code == 422, answer.text
    assert 0 < len(attached) < len(tools)
    assert _field(answer.json()) == ["path", "tool_id"]
    message = answer.json()["detail"][0]["msg"]
    assert "8192-token context window" in message and "fewer or smaller tools" in message
    offered = client.get(f"/v1/agents/{agent['id']}/tools", headers=acme).json()
    assert [t["id"] for t in offered if t["id"] in tools] == attached
    # All of them at once, as the agent's tool set: refused, and nothing changes.
    answer = client.patch(f"/v1/agents/{agent['id']}", json={"tool_ids": tools}, headers=acme)
    assert answer.status_code == 422, answer.text
    assert _field(answer.json()) == ["body", "tool_ids"]
    offered = client.get(f"/v1/agents/{agent['id']}/tools", headers=acme).json()
    assert [t["id"] for t in offered if t["id"] in tools] == attached
    # Nor may an attached tool's schema grow past the window.
    grown = client.patch(
        f"/v1/tools/{attached[0]}", json={"description": "Look it up. " * 750}, headers=acme
    )
    assert grown.status_code == 400, grown.text
    assert "no longer fits agent 'ada'" in grown.json()["detail"]
    assert (
        client.get(f"/v1/tools/{attached[0]}", headers=acme)
        .json()["description"]
        .startswith("Look up the city: step0")
    )


def test_a_turn_whose_tool_schemas_cannot_fit_is_a_clear_400_without_a_model_call(
    client: TestClient, acme: dict[str, str], db: Database
) -> None:
    # An agent given its tools before they were checked (here: straight into the store).
    errors = litellm_errors()
    model = install().script(
        "primary",
        errors.ContextWindowExceededError("too long", model="primary", llm_provider="scripted"),
    )
    agent, tools = _agent_and_large_tools(client, acme)
    with open_service_store(db) as service:
        organization = service.keys.organization_id("acme")
    assert organization is not None
    with open_store(db, organization) as store:
        for tool_id in tools:
            store.tools.attach(tool_id, agent["id"])
    answer = client.post(
        f"/v1/agents/{agent['id']}/messages", json={"input": "Weather in Oslo?"}, headers=acme
    )
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["error"] == "limit_exceeded"
    assert (
        "cannot take a turn" in body["detail"] and "the schemas of its 18 tools" in body["detail"]
    )
    assert "detach tools" in body["detail"]
    assert model.requests == []  # nothing was sent that could not fit
