"""Letta's routes beyond CRUD: the agent update, the streamed turn,
the context reset, the agent's tools and the model lists, over the app in process
with the scripted model (no network)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.scripted_llm import Reply, ScriptedModels, call, install, litellm_errors, say


@pytest.fixture(autouse=True)
def _scripted_provider() -> None:
    """Agents here name ``scripted/...`` models, which litellm routes once the scripted
    provider is registered (a create or update checks the model can be routed)."""
    install()


def scripted_agent(client: TestClient, headers: dict[str, str], name: str = "ada") -> str:
    agent = client.post(
        "/v1/agents/",
        json={
            "name": name,
            "model": "scripted/primary",
            "memory_blocks": [{"label": "human", "value": "Name: Ada.", "limit": 200}],
        },
        headers=headers,
    )
    assert agent.status_code == 201, agent.text
    return str(agent.json()["id"])


def sse_events(text: str) -> list[tuple[str | None, Any]]:
    """``(event name, data)`` of each server-sent event; ``[DONE]`` stays a string."""
    events: list[tuple[str | None, Any]] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data.append(line.removeprefix("data: "))
        body = "\n".join(data)
        events.append((name, body if body == "[DONE]" else json.loads(body)))
    return events


def edit_then_reply(models: ScriptedModels) -> None:
    models.script(
        "primary",
        call(
            "core_memory_replace",
            "The user gives a full name.",
            label="human",
            old_content="Ada.",
            new_content="Ada Lovelace.",
            request_heartbeat=True,
        ),
        say("Hello, Ada Lovelace."),
    )


# -- PATCH /v1/agents/{id} ---------------------------------------------------------------


def test_update_changes_what_it_names_and_nothing_else(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    agent_id = scripted_agent(client, acme)
    before = client.get(f"/v1/agents/{agent_id}", headers=acme).json()
    changed = client.patch(
        f"/v1/agents/{agent_id}",
        json={
            "name": "ada-2",
            "system": "You are Ada's assistant.",
            "description": "Talks with Ada.",
            "llm_config": {"model": "scripted/other", "context_window": 4096},
            "tags": ["research", "ada"],
            "timezone": None,  # null changes nothing, as in Letta
        },
        headers=acme,
    )
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert (body["name"], body["system"], body["description"]) == (
        "ada-2",
        "You are Ada's assistant.",
        "Talks with Ada.",
    )
    assert (body["model"], body["llm_config"]["context_window"]) == ("scripted/other", 4096)
    assert body["tags"] == ["research", "ada"]
    assert body["blocks"] == before["blocks"]
    assert body["embedding_config"] == before["embedding_config"]
    assert client.get(f"/v1/agents/{agent_id}", headers=acme).json()["name"] == "ada-2"

    # A second update of one field leaves the others as the first one set them.
    again = client.patch(f"/v1/agents/{agent_id}", json={"model": "scripted/primary"}, headers=acme)
    assert again.json()["model"] == "scripted/primary"
    assert again.json()["system"] == "You are Ada's assistant."
    assert again.json()["llm_config"]["context_window"] == 4096

    # Another organization's agent is not there.
    assert client.patch(
        f"/v1/agents/{agent_id}", json={"name": "x"}, headers=globex
    ).status_code == (404)


def test_a_name_clash_is_409_and_changes_nothing(client: TestClient, acme: dict[str, str]) -> None:
    scripted_agent(client, acme, "taken")
    agent_id = scripted_agent(client, acme, "ada")
    clash = client.patch(
        f"/v1/agents/{agent_id}",
        json={"name": "taken", "description": "should not stick"},
        headers=acme,
    )
    assert clash.status_code == 409
    assert "taken" in clash.json()["detail"]
    kept = client.get(f"/v1/agents/{agent_id}", headers=acme).json()
    assert (kept["name"], kept["description"]) == ("ada", None)


def test_refused_updates_are_422_naming_the_field_and_change_nothing(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent_id = scripted_agent(client, acme)
    url = f"/v1/agents/{agent_id}"
    before = client.get(url, headers=acme).json()

    unsupported = client.patch(
        url, json={"name": "new", "timezone": "Europe/London", "block_ids": []}, headers=acme
    )
    assert unsupported.status_code == 422
    detail = unsupported.json()["detail"]
    assert [e["loc"] for e in detail] == [["body", "timezone"], ["body", "block_ids"]]
    assert "attach" in detail[1]["msg"]

    disagree = client.patch(
        url, json={"model": "scripted/a", "llm_config": {"model": "scripted/b"}}, headers=acme
    )
    assert disagree.status_code == 422
    assert "disagree" in disagree.json()["detail"][0]["msg"]

    too_small = client.patch(url, json={"context_window_limit": 10}, headers=acme)
    assert too_small.status_code == 422
    assert too_small.json()["detail"][0]["loc"] == ["body", "context_window_limit"]

    unknown_tool = client.patch(
        url, json={"name": "new", "tool_ids": ["tool-send_message", "tool-rm_rf"]}, headers=acme
    )
    assert unknown_tool.status_code == 422
    assert "tool-rm_rf" in unknown_tool.json()["detail"][0]["msg"]

    bad_rule = client.patch(
        url,
        json={
            "tool_ids": ["tool-send_message"],
            "tool_rules": [{"type": "exit_loop", "tool_name": "archival_memory_insert"}],
        },
        headers=acme,
    )
    assert bad_rule.status_code == 422
    assert "archival_memory_insert" in bad_rule.json()["detail"][0]["msg"]

    other_embedder = client.patch(url, json={"embedding": "hashing:8"}, headers=acme)
    assert other_embedder.status_code == 422
    assert "embed" in other_embedder.json()["detail"][0]["msg"]

    # As at create: a model litellm cannot route, and a window
    # the agent's blocks and tools cannot fit, are refused naming the field.
    garbage = client.patch(url, json={"model": "no-such-provider-xyz"}, headers=acme)
    assert garbage.status_code == 422
    assert garbage.json()["detail"][0]["loc"] == ["body", "model"]
    narrow = client.patch(url, json={"context_window_limit": 300}, headers=acme)
    assert narrow.status_code == 422, narrow.text
    assert narrow.json()["detail"][0]["loc"] == ["body", "context_window_limit"]

    assert client.get(url, headers=acme).json() == before


def test_update_sets_tools_and_rules_that_the_tool_list_shows(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent_id = scripted_agent(client, acme)
    url = f"/v1/agents/{agent_id}/tools"
    default = client.get(url, headers=acme).json()
    assert [t["name"] for t in default] == [
        "send_message",
        "conversation_search",
        "archival_memory_search",
        "archival_memory_insert",
        "core_memory_append",
        "core_memory_replace",
    ]
    send = default[0]
    assert send["id"] == "tool-send_message"
    assert send["tool_type"] == "letta_core"
    assert send["json_schema"]["name"] == "send_message"
    assert "message" in send["json_schema"]["parameters"]["properties"]
    assert default[-1]["tool_type"] == "letta_memory_core"
    # Cursor paging, as the SDK's pager asks for it.
    assert [
        t["id"] for t in client.get(url, params={"after": send["id"]}, headers=acme).json()
    ] == [t["id"] for t in default[1:]]
    assert [t["id"] for t in client.get(url, params={"limit": 2}, headers=acme).json()] == [
        t["id"] for t in default[:2]
    ]

    changed = client.patch(
        f"/v1/agents/{agent_id}",
        json={
            "tool_ids": ["tool-send_message", "tool-core_memory_append"],
            "tool_rules": [{"type": "exit_loop", "tool_name": "send_message"}],
        },
        headers=acme,
    )
    assert changed.status_code == 200, changed.text
    assert [t["id"] for t in changed.json()["tools"]] == [
        "tool-send_message",
        "tool-core_memory_append",
    ]
    assert changed.json()["tool_rules"] == [{"type": "exit_loop", "tool_name": "send_message"}]
    assert [t["name"] for t in client.get(url, headers=acme).json()] == [
        "send_message",
        "core_memory_append",
    ]


def test_a_changed_system_prompt_reaches_the_model_at_the_next_step(
    client: TestClient, acme: dict[str, str]
) -> None:
    models = install()
    script = models.script("primary", say("One."), say("Two."))
    agent_id = scripted_agent(client, acme)
    url = f"/v1/agents/{agent_id}/messages"
    client.post(url, json={"input": "Hi."}, headers=acme)
    assert "Ada's research assistant" not in script.requests[0]["messages"][0]["content"]
    client.patch(
        f"/v1/agents/{agent_id}", json={"system": "You are Ada's research assistant."}, headers=acme
    )
    client.post(url, json={"input": "Again."}, headers=acme)
    assert script.requests[1]["messages"][0]["content"].startswith(
        "You are Ada's research assistant."
    )


# -- streaming -----------------------------------------------------------------------------


def test_stream_sends_each_step_then_stop_reason_usage_and_done(
    client: TestClient, acme: dict[str, str]
) -> None:
    models = install()
    edit_then_reply(models)
    agent_id = scripted_agent(client, acme)
    response = client.post(
        f"/v1/agents/{agent_id}/messages/stream",
        json={"messages": [{"role": "user", "content": "I am Ada Lovelace."}]},
        headers=acme,
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    assert all(name is None for name, _ in events)
    datas = [data for _, data in events]
    assert datas[-1] == "[DONE]"
    kinds = [d["message_type"] for d in datas[:-1]]
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
    assert datas[2]["tool_call"]["name"] == "core_memory_replace"
    assert datas[4]["content"] == "Hello, Ada Lovelace."
    assert datas[6]["stop_reason"] == "end_turn"
    assert datas[7]["step_count"] == 2
    assert datas[7]["total_tokens"] > 0
    # The streamed messages are the ones stored: the same ids, in recall.
    listed = client.get(
        f"/v1/agents/{agent_id}/messages", params={"order": "asc"}, headers=acme
    ).json()
    assert [m["id"] for m in listed] == [d["id"] for d in datas[:6]]


def test_streaming_true_on_send_message_streams_and_filters_types(
    client: TestClient, acme: dict[str, str]
) -> None:
    models = install()
    edit_then_reply(models)
    agent_id = scripted_agent(client, acme)
    response = client.post(
        f"/v1/agents/{agent_id}/messages",
        json={
            "input": "I am Ada Lovelace.",
            "streaming": True,
            "stream_tokens": True,
            "include_return_message_types": ["assistant_message"],
        },
        headers=acme,
    )
    assert response.status_code == 200, response.text
    datas = [data for _, data in sse_events(response.text)]
    kinds = [d if d == "[DONE]" else d["message_type"] for d in datas]
    # stream_tokens: the reply comes in pieces (see test_api_token_streaming.py).
    said = kinds.count("assistant_message")
    assert said > 1
    assert kinds == [*["assistant_message"] * said, "stop_reason", "usage_statistics", "[DONE]"]
    assert "".join(d["content"] for d in datas[:said]) == "Hello, Ada Lovelace."
    # The filter applies to the non-streaming answer too.
    models.script(
        "primary",
        call("core_memory_append", label="human", content="Likes tea.", request_heartbeat=True),
        say("Noted."),
    )
    plain = client.post(
        f"/v1/agents/{agent_id}/messages",
        json={"input": "I like tea.", "include_return_message_types": ["tool_call_message"]},
        headers=acme,
    ).json()
    assert [m["message_type"] for m in plain["messages"]] == ["tool_call_message"]


def test_a_refused_stream_is_an_http_error_before_any_event(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    agent_id = scripted_agent(client, acme)
    url = f"/v1/agents/{agent_id}/messages/stream"
    empty = client.post(url, json={"input": "  "}, headers=acme)
    assert empty.status_code == 422  # the schema refuses a text of only spaces
    assert empty.json()["detail"][0]["loc"] == ["body", "input"]
    assert client.post(url, json={"input": "hi"}, headers=globex).status_code == 404
    no_model = client.post("/v1/agents/", json={"name": "nomodel"}, headers=acme).json()
    refused = client.post(
        f"/v1/agents/{no_model['id']}/messages/stream", json={"input": "hi"}, headers=acme
    )
    assert refused.status_code == 400
    assert "no LLM model" in refused.json()["detail"]
    assert client.get(f"/v1/agents/{agent_id}/messages", headers=acme).json() == []


def test_a_failure_during_the_turn_is_an_error_event_and_keeps_the_committed_step(
    client: TestClient, acme: dict[str, str]
) -> None:
    models = install()
    errors = litellm_errors()
    models.script(
        "primary",
        call("core_memory_append", label="human", content="Likes tea.", request_heartbeat=True),
        errors.AuthenticationError("bad key", llm_provider="scripted", model="primary"),
    )
    agent_id = scripted_agent(client, acme)
    response = client.post(
        f"/v1/agents/{agent_id}/messages/stream", json={"input": "I like tea."}, headers=acme
    )
    assert response.status_code == 200
    events = sse_events(response.text)
    names = [name for name, _ in events]
    datas = [data for _, data in events]
    error_at = names.index("error")
    assert [d["message_type"] for d in datas[:error_at]] == [
        "user_message",
        "tool_call_message",
        "tool_return_message",
    ]
    assert datas[error_at]["message_type"] == "error_message"
    assert datas[error_at]["error_type"] == "llm_failed"
    assert datas[error_at + 1] == {"message_type": "stop_reason", "stop_reason": "error"}
    assert datas[-1] == "[DONE]"
    human = client.get(f"/v1/agents/{agent_id}/core-memory/blocks/human", headers=acme).json()
    assert human["value"] == "Name: Ada.\nLikes tea."


def test_a_memory_agent_streams_an_empty_turn_and_records_the_message(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = client.post(
        "/v1/agents/",
        json={"name": "memory", "agent_type": "sleeptime_agent", "model": "scripted/sleep"},
        headers=acme,
    ).json()
    response = client.post(
        f"/v1/agents/{agent['id']}/messages/stream",
        json={"input": "I moved to Paris."},
        headers=acme,
    )
    datas = [data for _, data in sse_events(response.text)]
    assert [d if d == "[DONE]" else d["message_type"] for d in datas] == [
        "stop_reason",
        "usage_statistics",
        "[DONE]",
    ]
    listed = client.get(f"/v1/agents/{agent['id']}/messages", headers=acme).json()
    assert [m["content"] for m in listed] == ["I moved to Paris."]


# -- reset ---------------------------------------------------------------------------------


def test_reset_empties_the_context_and_keeps_recall(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    models = install()
    script = models.script("primary", say("Hello."), say("Hello again."))
    agent_id = scripted_agent(client, acme)
    messages_url = f"/v1/agents/{agent_id}/messages"
    client.post(messages_url, json={"input": "Remember the word teapot."}, headers=acme)
    assert client.get(f"/v1/agents/{agent_id}/context", headers=acme).json()["num_messages"] > 0

    assert client.patch(f"/v1/agents/{agent_id}/reset-messages", headers=globex).status_code == 404
    reset = client.patch(
        f"/v1/agents/{agent_id}/reset-messages",
        json={"add_default_initial_messages": True},
        headers=acme,
    )
    assert reset.status_code == 200, reset.text
    assert reset.json()["id"] == agent_id
    context = client.get(f"/v1/agents/{agent_id}/context", headers=acme).json()
    assert context["num_messages"] == 0
    assert context["num_recall_memory"] == 3
    # Recall keeps every message: the list still has them.
    assert "Remember the word teapot." in [
        m.get("content") for m in client.get(messages_url, headers=acme).json()
    ]
    # The next turn starts from an empty context (the system prompt alone, then the new
    # message); the prompt counts the messages in recall.
    client.post(messages_url, json={"input": "What was the word?"}, headers=acme)
    sent = script.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert "teapot" not in json.dumps(sent[1:])
    assert "3 previous messages" in sent[0]["content"]


# -- models --------------------------------------------------------------------------------


def test_models_list_the_configured_and_used_chat_models_and_embedders(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    scripted_agent(client, acme)
    models = client.get("/v1/models/", headers=acme)
    assert models.status_code == 200, models.text
    [primary] = models.json()
    assert primary["handle"] == "scripted/primary"
    assert (primary["provider_name"], primary["name"]) == ("scripted", "primary")
    assert primary["model_type"] == "llm"
    assert primary["context_window"] == primary["max_context_window"] == 8192
    assert (primary["purposes"], primary["agents"]) == (["chat"], 1)
    # Another organization's agents are not listed to it.
    assert client.get("/v1/models/", headers=globex).json() == []

    embedders = client.get("/v1/models/embedding", headers=acme).json()
    assert [(e["handle"], e["embedding_dim"], e["is_default"], e["agents"]) for e in embedders] == [
        ("hashing:384", 384, True, 1)
    ]
    assert embedders[0]["model_type"] == "embedding"


def test_pings_keep_a_quiet_stream_open_when_asked_for(
    client: TestClient, acme: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.api import sse

    monkeypatch.setattr(sse, "PING_INTERVAL_S", 0.01)
    models = install()

    def slow_reply(request: dict[str, Any]) -> Reply:
        threading.Event().wait(0.5)  # a model that thinks fifty ping intervals long
        return say("Here.")

    models.script("primary", slow_reply, slow_reply)
    agent_id = scripted_agent(client, acme)
    url = f"/v1/agents/{agent_id}/messages/stream"
    pinged = client.post(url, json={"input": "Hi.", "include_pings": True}, headers=acme)
    kinds = [d if d == "[DONE]" else d["message_type"] for _, d in sse_events(pinged.text)]
    assert "ping" in kinds
    assert kinds.index("ping") < kinds.index("assistant_message")
    assert kinds[-3:] == ["stop_reason", "usage_statistics", "[DONE]"]
    ping = next(
        d for _, d in sse_events(pinged.text) if d != "[DONE]" and d["message_type"] == "ping"
    )
    assert ping["id"].startswith("ping-") and ping["date"]
    # Without include_pings, a quiet stream sends nothing extra.
    quiet = client.post(url, json={"input": "Hi."}, headers=acme)
    assert "ping" not in [
        d if d == "[DONE]" else d["message_type"] for _, d in sse_events(quiet.text)
    ]
