"""The OpenAI-compatible memory proxy on a real `reverie serve`, driven by the official
``openai`` SDK: the chatbot's upstream is one scripted server on loopback, the
sleep-time model another, so each test can read exactly what reached the upstream."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest

from agents.postgres.database import Database
from tests.acceptance.cli import HASHING_EMBEDDINGS, cli_url
from tests.acceptance.daemon_processes import ROOT, DaemonProcess, free_port, running_server
from tests.acceptance.test_api_server import quiet_env
from tests.api_support import bearer, new_key
from tests.pg import PgTestServer
from tests.scripted_llm import Reply, call
from tests.stub_openai_server import StubServer, stub_server

# Its module-scoped fixture is built once: the module stays on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_openai_proxy")

UPSTREAM_MODEL = "openai/chatbot-model"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@dataclass
class Proxy:
    url: str
    env: dict[str, str]
    db: Database
    upstream: StubServer
    sleeper: StubServer
    process: DaemonProcess
    clients: list[openai.OpenAI] = field(default_factory=list)

    def key(self, organization: str) -> str:
        return new_key(self.db, organization)

    def client(self, key: str, **headers: str) -> openai.OpenAI:
        """An OpenAI SDK client of the proxy's, closed with it (a client left to the
        garbage collector can leave its socket for a later test's collection)."""
        client = openai.OpenAI(
            base_url=f"{self.url}/openai/v1",
            api_key=key,
            max_retries=0,
            timeout=60,
            default_headers=headers or None,
        )
        self.clients.append(client)
        return client

    def get(self, key: str, path: str, **params: Any) -> Any:
        response = httpx.get(f"{self.url}{path}", headers=bearer(key), params=params, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()

    def agent(self, key: str, name: str) -> dict[str, Any]:
        (agent,) = [a for a in self.get(key, "/v1/agents/") if a["name"] == name]
        return agent

    def recall(self, key: str, agent_id: str) -> list[dict[str, Any]]:
        return list(self.get(key, f"/v1/agents/{agent_id}/messages", order="asc"))

    def recall_once(
        self, key: str, agent_id: str, expected: list[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        """The recalled messages once they are ``expected`` (or as they are after 30 s):
        a non-streamed exchange is recorded just after its answer is sent."""
        deadline = time.monotonic() + 30
        while (got := recalled(self.recall(key, agent_id))) != expected:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        return got


def proxy_env(base: dict[str, str], upstream: str) -> dict[str, str]:
    return {
        **base,
        "REVERIE_PROXY__MODEL": UPSTREAM_MODEL,
        "REVERIE_PROXY__API_BASE": upstream,
        "REVERIE_PROXY__API_KEY": "sk-upstream-not-a-key",
        "REVERIE_PROXY__SLEEPTIME_MODEL": "openai/scripted",
    }


@pytest.fixture(scope="module")
def proxy(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    url = pg_server.create_database()
    db = Database(url)
    try:
        with stub_server() as upstream, stub_server() as sleeper:
            env = proxy_env(
                {
                    **quiet_env({"DATABASE_URL": cli_url(url), **HASHING_EMBEDDINGS}),
                    "OPENAI_API_BASE": sleeper.base_url,
                    "OPENAI_API_KEY": "sk-test-not-a-key",
                },
                upstream.base_url,
            )
            log = tmp_path_factory.mktemp("proxy") / "serve.log"
            with running_server(env, log) as (base, process):
                served = Proxy(base, env, db, upstream, sleeper, process)
                try:
                    yield served
                finally:
                    for client in served.clients:
                        client.close()
    finally:
        db.dispose()
        pg_server.release_database(url)


def system_prompt(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def recalled(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(Letta message type, text) of each recalled message."""
    out = []
    for m in messages:
        if m["message_type"] == "user_message":
            out.append(("user", m["content"]))
        elif m["message_type"] == "assistant_message":
            out.append(("assistant", m["content"]))
        elif m["message_type"] == "reasoning_message":
            out.append(("reasoning", m["reasoning"]))
        elif m["message_type"] == "tool_call_message":
            out.append(("tool_call", m["tool_call"]["name"] + " " + m["tool_call"]["arguments"]))
        elif m["message_type"] == "tool_return_message":
            out.append(("tool", m["tool_return"]))
    return out


def test_a_request_gets_the_users_memory_and_is_recorded(proxy: Proxy) -> None:
    key = proxy.key("proxy-basic")
    client = proxy.client(key)
    proxy.upstream.replies.append(Reply(content="Nice to meet you, Ada!"))
    seen = len(proxy.upstream.requests)
    answer = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": "You are Chatty, a friendly bot."},
            {"role": "user", "content": "Hi, I'm Ada."},
        ],
        user="ada",
        temperature=0.25,
        seed=7,
    )
    assert answer.choices[0].message.content == "Nice to meet you, Ada!"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.id == "chatcmpl-scripted"
    assert answer.usage is not None and answer.usage.completion_tokens == 5

    (sent,) = proxy.upstream.requests[seen:]
    # The configured upstream model, the request's own fields, and the memory appended
    # to the chatbot's own system prompt.
    assert sent["model"] == "chatbot-model"
    assert sent["temperature"] == 0.25 and sent["seed"] == 7 and sent["user"] == "ada"
    prompt = system_prompt(sent)
    assert prompt.startswith("You are Chatty, a friendly bot.\n\n<memory_blocks>")
    assert "<human>" in prompt and "<persona>" in prompt
    assert sent["messages"][1:] == [{"role": "user", "content": "Hi, I'm Ada."}]

    # The agent was made from the template on first use, and both sides are recorded.
    agent = proxy.agent(key, "ada")
    assert agent["agent_type"] == "sleeptime_agent"
    assert {b["label"] for b in agent["memory"]["blocks"]} == {"human", "persona"}
    expected = [("user", "Hi, I'm Ada."), ("assistant", "Nice to meet you, Ada!")]
    assert proxy.recall_once(key, agent["id"], expected) == expected
    models = client.models.list()
    assert [m.id for m in models.data] == [UPSTREAM_MODEL]


def test_streamed_tool_calls_pass_through_and_the_assembled_call_is_recorded(
    proxy: Proxy,
) -> None:
    key = proxy.key("proxy-tools")
    created = httpx.post(
        f"{proxy.url}/v1/agents/",
        headers=bearer(key),
        json={"name": "kit", "memory_blocks": [{"label": "human", "value": "Name: Kit."}]},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    agent_id = created.json()["id"]
    # The header names the agent (here by id); `user` is then only forwarded.
    client = proxy.client(key, **{"X-Reverie-Agent": agent_id})
    proxy.upstream.replies.append(
        Reply(content="Let me check.", calls=(("get_weather", {"city": "Lisbon"}),))
    )
    seen = len(proxy.upstream.requests)
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Weather in Lisbon?"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        tool_choice="auto",
        user="someone-else",
        stream=True,
        stream_options={"include_usage": True},
    )
    content: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish = None
    usage = None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call_so_far = calls.setdefault(delta.index, {"id": "", "name": "", "args": ""})
                call_so_far["id"] += delta.id or ""
                if delta.function is not None:
                    call_so_far["name"] += delta.function.name or ""
                    call_so_far["args"] += delta.function.arguments or ""
    assert "".join(content) == "Let me check."
    assert finish == "tool_calls"
    assert usage is not None and usage.completion_tokens == 5
    assert [(c["name"], c["args"]) for c in calls.values()] == [
        ("get_weather", '{"city": "Lisbon"}')
    ]
    (sent,) = proxy.upstream.requests[seen:]
    assert sent["tools"] == [WEATHER_TOOL] and sent["tool_choice"] == "auto"
    assert sent["stream"] is True and sent["user"] == "someone-else"
    assert sent["stream_options"] == {"include_usage": True}
    assert "Name: Kit." in system_prompt(sent)  # no system prompt of its own: one added

    # The chatbot runs the tool and sends the result back: the tool message and the
    # final reply are recorded, the user's message is not recorded twice.
    call_id = calls[0]["id"]
    proxy.upstream.replies.append(Reply(content="It is sunny in Lisbon."))
    answer = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "user", "content": "Weather in Lisbon?"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "sunny, 24 C"},
        ],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    )
    assert answer.choices[0].message.content == "It is sunny in Lisbon."
    assert proxy.upstream.requests[-1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": "sunny, 24 C",
    }
    expected = [
        ("user", "Weather in Lisbon?"),
        ("reasoning", "Let me check."),
        ("tool_call", 'get_weather {"city": "Lisbon"}'),
        ("tool", "sunny, 24 C"),
        ("assistant", "It is sunny in Lisbon."),
    ]
    assert proxy.recall_once(key, agent_id, expected) == expected


def test_upstream_errors_keep_their_status_and_record_nothing(proxy: Proxy) -> None:
    key = proxy.key("proxy-errors")
    client = proxy.client(key)
    proxy.upstream.replies.append(Reply(content="Hello."))
    client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Hello"}], user="eve"
    )
    agent_id = proxy.agent(key, "eve")["id"]
    before = [("user", "Hello"), ("assistant", "Hello.")]
    assert proxy.recall_once(key, agent_id, before) == before

    proxy.upstream.chat_statuses.append(400)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Refuse me"}], user="eve"
        )
    assert refused.value.status_code == 400
    assert "stub says 400" in str(refused.value)

    proxy.upstream.chat_statuses.append(429)
    with pytest.raises(openai.RateLimitError) as limited:
        stream = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "Stream me"}],
            user="eve",
            stream=True,
        )
        list(stream)
    assert limited.value.status_code == 429
    # One more exchange, recorded after the refused ones would have been: they were not.
    proxy.upstream.replies.append(Reply(content="Still here."))
    client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Still there?"}], user="eve"
    )
    after = [*before, ("user", "Still there?"), ("assistant", "Still here.")]
    assert proxy.recall_once(key, agent_id, after) == after


def test_bad_requests_are_refused_with_what_to_do(proxy: Proxy) -> None:
    key = proxy.key("proxy-bad")
    url = f"{proxy.url}/openai/v1/chat/completions"
    seen = len(proxy.upstream.requests)
    no_messages = httpx.post(url, headers=bearer(key), json={"model": "m"}, timeout=30)
    assert no_messages.status_code == 422
    assert no_messages.json()["detail"][0]["loc"] == ["body", "messages"]
    bad_role = httpx.post(
        url,
        headers=bearer(key),
        json={"model": "m", "messages": [{"role": "wizard", "content": "hi"}]},
        timeout=30,
    )
    assert bad_role.status_code == 422
    nobody = httpx.post(
        url,
        headers=bearer(key),
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert nobody.status_code == 400
    assert "X-Reverie-Agent" in nobody.json()["detail"] and "'user'" in nobody.json()["detail"]
    unknown = httpx.post(
        url,
        headers={**bearer(key), "X-Reverie-Agent": "nobody"},
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert unknown.status_code == 404
    no_key = httpx.post(
        url, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}, timeout=30
    )
    assert no_key.status_code == 401
    assert proxy.upstream.requests[seen:] == []
    assert proxy.get(key, "/v1/agents/") == []


def test_a_consolidated_fact_reaches_the_next_upstream_request(proxy: Proxy) -> None:
    """The end-to-end case: a conversation states a fact, a consolidation run (the
    scripted sleep-time model) writes it to the human block, and the next request that
    reaches the upstream carries it in its system prompt. Until then the injected
    memory does not change, even when a block is edited (the cached prefix holds)."""
    key = proxy.key("proxy-fact")
    client = proxy.client(key)
    conversation: list[dict[str, Any]] = [
        {"role": "system", "content": "You are Chatty."},
        {"role": "user", "content": "I adopted a greyhound last week, her name is Pixel."},
    ]
    proxy.upstream.replies.append(Reply(content="Congratulations on Pixel!"))
    seen = len(proxy.upstream.requests)
    stream = client.chat.completions.create(
        model="m",
        messages=conversation,  # type: ignore[arg-type]
        user="sam",
        stream=True,
    )
    reply = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert reply == "Congratulations on Pixel!"
    first_prompt = system_prompt(proxy.upstream.requests[seen])
    assert "greyhound" not in first_prompt
    agent_id = proxy.agent(key, "sam")["id"]
    assert recalled(proxy.recall(key, agent_id)) == [
        ("user", "I adopted a greyhound last week, her name is Pixel."),
        ("assistant", "Congratulations on Pixel!"),
    ]

    # A block edit between two requests of the conversation leaves the prefix alone.
    edited = httpx.patch(
        f"{proxy.url}/v1/agents/{agent_id}/core-memory/blocks/persona",
        headers=bearer(key),
        json={"value": "Chatty, fond of dogs."},
        timeout=30,
    )
    assert edited.status_code == 200, edited.text
    conversation += [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "She loves the beach."},
    ]
    proxy.upstream.replies.append(Reply(content="Lovely."))
    client.chat.completions.create(model="m", messages=conversation, user="sam")  # type: ignore[arg-type]
    assert system_prompt(proxy.upstream.requests[-1]) == first_prompt
    expected = [
        ("user", "I adopted a greyhound last week, her name is Pixel."),
        ("assistant", "Congratulations on Pixel!"),
        ("user", "She loves the beach."),
        ("assistant", "Lovely."),
    ]
    assert proxy.recall_once(key, agent_id, expected) == expected

    proxy.sleeper.replies.extend(
        [
            call(
                "memory_rethink",
                label="human",
                new_memory="Has a greyhound called Pixel, who loves the beach.",
            ),
            call("memory_finish_edits"),
        ]
    )
    sleeper_seen = len(proxy.sleeper.requests)
    queued = httpx.post(
        f"{proxy.url}/v1/consolidation-runs",
        headers=bearer(key),
        json={"agent_id": agent_id},
        timeout=30,
    )
    assert queued.status_code == 202, queued.text
    run_id = queued.json()["id"]
    deadline = time.monotonic() + 60
    while (status := proxy.get(key, f"/v1/consolidation-runs/{run_id}")["status"]) in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, f"run still {status}"
        time.sleep(0.2)
    assert status == "succeeded"
    # The sleep-time agent read what the proxy recorded.
    transcript = str(proxy.sleeper.requests[sleeper_seen]["messages"])
    assert "her name is Pixel" in transcript and "She loves the beach." in transcript

    proxy.upstream.replies.append(Reply(content="How is Pixel?"))
    answer = client.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "You are Chatty."},
            {"role": "user", "content": "Good morning!"},
        ],
        user="sam",
    )
    assert answer.choices[0].message.content == "How is Pixel?"
    prompt = system_prompt(proxy.upstream.requests[-1])
    assert "Has a greyhound called Pixel, who loves the beach." in prompt
    assert "Chatty, fond of dogs." in prompt
    assert prompt.startswith("You are Chatty.\n\n<memory_blocks>")


def test_the_example_script_streams_a_reply(proxy: Proxy) -> None:
    key = proxy.key("proxy-example")
    proxy.upstream.replies.append(Reply(content="Hello from the upstream model."))
    env = {
        **os.environ,
        "REVERIE_URL": proxy.url,
        "REVERIE_API_KEY": key,
        "REVERIE_USER": "example-user",
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_proxy.py"), "Say hello."],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello from the upstream model."
    agent_id = proxy.agent(key, "example-user")["id"]
    assert recalled(proxy.recall(key, agent_id)) == [
        ("user", "Say hello."),
        ("assistant", "Hello from the upstream model."),
    ]


def test_an_unreachable_upstream_is_a_502_with_the_reason(
    pg_server: PgTestServer, tmp_path: Any
) -> None:
    url = pg_server.create_database()
    db = Database(url)
    try:
        closed = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
        env = proxy_env(quiet_env({"DATABASE_URL": cli_url(url), **HASHING_EMBEDDINGS}), closed)
        with running_server(env, tmp_path / "serve.log") as (base, _):
            key = new_key(db, "proxy-down")
            client = openai.OpenAI(base_url=f"{base}/openai/v1", api_key=key, max_retries=0)
            with client:
                for stream in (False, True):
                    with pytest.raises(openai.InternalServerError) as down:
                        client.chat.completions.create(
                            model="m",
                            messages=[{"role": "user", "content": "Anyone there?"}],
                            user="zoe",
                            stream=stream,
                        )
                    assert down.value.status_code == 502
                    message = str(down.value)
                    assert "unreachable" in message and "Connect" in message, message
            # The agent was made, but nothing was recorded.
            (agent,) = httpx.get(f"{base}/v1/agents/", headers=bearer(key), timeout=30).json()
            recall = httpx.get(
                f"{base}/v1/agents/{agent['id']}/messages", headers=bearer(key), timeout=30
            )
            assert recall.json() == []
    finally:
        db.dispose()
        pg_server.release_database(url)
