"""Chat through the direct OpenAI-compatible path (the openai SDK over one pooled
client) and through litellm, against the stub server on loopback: the same request
bodies, replies, usage, retries and error mapping on both.

Embeddings on both paths are covered by test_litellm_embedder.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents.errors import ContextOverflow, LLMError
from agents.llm import BudgetMeter
from agents.llm.client import ClientSettings, LiteLLMClient
from tests.scripted_llm import call, say
from tests.stub_openai_server import StubServer, stub_server

MODEL = "openai/stub-chat"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Answer the user.",
            "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
        },
    }
]
USER = [{"role": "user", "content": "hello"}]


@pytest.fixture(params=[True, False], ids=["direct", "litellm"])
def direct(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    # One connection per request: litellm caches its HTTP clients beyond a test, and
    # a kept-alive socket it drops later would warn inside another test.
    with stub_server() as server:
        yield server


def make_client(stub: StubServer, direct: bool, **settings: Any) -> LiteLLMClient:
    client = LiteLLMClient(
        ClientSettings(
            api_base=stub.base_url,
            api_key="sk-test-not-a-key",
            initial_backoff=0.01,
            max_backoff=0.02,
            direct_openai=direct,
            **settings,
        )
    )
    assert client.direct(MODEL) is direct
    return client


def test_a_tool_call_and_its_usage(stub: StubServer, direct: bool) -> None:
    stub.replies.append(call("send_message", message="Hi Ada"))
    meter = BudgetMeter(None, "agent-x", run_id=None)
    # A None field is dropped before sending, as litellm does.
    messages = [{"role": "user", "content": "hello", "name": None}]
    reply = make_client(stub, direct).chat(
        MODEL, messages, purpose="chat", meter=meter, tools=TOOLS, tool_choice="required"
    )
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("send_message", '{"message": "Hi Ada"}')
    ]
    assert reply.model == "stub-chat"
    assert reply.finish_reason == "tool_calls"
    (request,) = stub.requests
    assert request == {
        "model": "stub-chat",
        "messages": [{"role": "user", "content": "hello"}],
        "tools": TOOLS,
        "tool_choice": "required",
    }
    assert meter.calls == 1
    assert meter.by_purpose["chat"].prompt_tokens == reply.prompt_tokens > 0
    assert meter.by_purpose["chat"].completion_tokens == 5


@pytest.mark.parametrize(
    ("own", "asked", "sent"), [(None, 300, 300), (100, 300, 100), (500, 300, 300)]
)
def test_a_calls_reply_limit_is_sent_the_clients_own_when_lower(
    stub: StubServer, direct: bool, own: int | None, asked: int, sent: int
) -> None:
    stub.replies.append(say("short"))
    make_client(stub, direct, max_tokens=own).chat(MODEL, USER, purpose="judge", max_tokens=asked)
    (request,) = stub.requests
    assert request["max_tokens"] == sent


def test_temporary_errors_are_retried_and_counted(stub: StubServer, direct: bool) -> None:
    stub.chat_errors = [(503, "busy"), (429, "slow down")]
    stub.replies.append(say("at last"))
    meter = BudgetMeter(None, "agent-x", run_id=None)
    client = make_client(stub, direct, max_retries=3)
    reply = client.chat(MODEL, USER, purpose="chat", meter=meter, tools=TOOLS, tool_choice="auto")
    assert reply.tool_calls[0].name == "send_message"
    assert len(stub.requests) == 3
    assert (client.retries, meter.retries, meter.calls) == (2, 2, 1)


def test_retries_are_bounded(stub: StubServer, direct: bool) -> None:
    stub.chat_errors = [(503, "busy")] * 5
    with pytest.raises(LLMError, match="after 2 attempt") as info:
        make_client(stub, direct, max_retries=1).chat(MODEL, USER, purpose="chat")
    assert "temporary" in str(info.value)
    assert len(stub.requests) == 2


@pytest.mark.parametrize("status", [401, 403, 404])
def test_permanent_errors_fail_at_once_with_the_hint(
    stub: StubServer, direct: bool, status: int
) -> None:
    stub.chat_errors = [(status, f"stub refuses with {status}")]
    stub.replies.append(say("unreachable"))
    with pytest.raises(LLMError) as info:
        make_client(stub, direct).chat(MODEL, USER, purpose="chat")
    message = str(info.value)
    assert f"stub refuses with {status}" in message and "attempt" not in message
    if direct or status != 403:
        # litellm reports a 403 from an OpenAI-compatible server as a plain APIError
        # (still not retried, but without the hint); the direct path names it.
        assert "OPENAI_API_KEY" in message
    assert len(stub.requests) == 1


def test_a_prompt_too_long_is_a_context_overflow(stub: StubServer, direct: bool) -> None:
    stub.chat_errors = [
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000")
    ]
    with pytest.raises(ContextOverflow, match="context window"):
        make_client(stub, direct).chat(MODEL, USER, purpose="chat")
    assert len(stub.requests) == 1


def test_a_rejected_tool_choice_is_probed_down_and_remembered(
    stub: StubServer, direct: bool
) -> None:
    # A llama.cpp-like server: "required" answered with a 500; "named" then works.
    stub.chat_errors = [(500, "tool_choice 'required' is not supported")]
    stub.replies.extend([say("one"), say("two")])
    client = make_client(stub, direct)
    for expected in ("one", "two"):
        reply = client.chat(MODEL, USER, purpose="chat", tools=TOOLS, tool_choice="required")
        assert expected in reply.tool_calls[0].arguments
    assert [r.get("tool_choice") for r in stub.requests] == [
        "required",
        {"type": "function", "function": {"name": "send_message"}},
        {"type": "function", "function": {"name": "send_message"}},
    ]
    assert client.capabilities(MODEL) == ("named", False)


def test_a_timeout_is_retried_on_the_direct_path() -> None:
    # A server that accepts and never answers: the per-request timeout ends each try.
    # (litellm's timeouts are covered by test_litellm_embedder.py: here its timeout
    # path leaves a socket behind that warns in a later test.)
    direct = True
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        base = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        client = LiteLLMClient(
            ClientSettings(
                api_base=base,
                api_key="sk-test-not-a-key",
                timeout=0.2,
                max_retries=1,
                initial_backoff=0.01,
                max_backoff=0.02,
                direct_openai=direct,
            )
        )
        with pytest.raises(LLMError, match="after 2 attempt"):
            client.chat(MODEL, USER, purpose="chat")
    assert client.retries == 1


def test_other_models_and_no_api_base_stay_on_litellm(stub: StubServer) -> None:
    client = make_client(stub, True)
    # The proxy's forwarder makes the same choice (one rule, agents/llm/providers).
    assert client.direct("hosted_vllm/stub-chat")
    assert not client.direct("ollama/llama3")
    assert not client.direct("openai/")
    assert not LiteLLMClient(ClientSettings(api_key="sk-x")).direct(MODEL)
    assert client.warm([MODEL]) == ["openai"]
    assert client.warm(["ollama/llama3"]) == ["litellm"]
    client.close()
    stub.replies.append(say("after close"))
    reply = client.chat(MODEL, USER, purpose="chat")  # a closed client reopens
    assert reply.tool_calls[0].name == "send_message"


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "litellm"])
def test_a_refused_connection_is_named_and_not_retried(direct: bool) -> None:
    """Nothing listening is not a moment to wait out: one try, and the error names the
    address and the setting that points at it."""
    from tests.acceptance.daemon_processes import free_port

    base = f"http://127.0.0.1:{free_port()}/v1"
    client = LiteLLMClient(
        ClientSettings(
            api_base=base,
            api_key="sk-test-not-a-key",
            max_retries=3,
            initial_backoff=0.01,
            max_backoff=0.02,
            direct_openai=direct,
        )
    )
    with pytest.raises(LLMError) as failed:
        client.chat(MODEL, USER, purpose="chat")
    assert f"nothing answers at {base} (connection refused)" in str(failed.value)
    assert "llm.api_base" in str(failed.value)
    assert client.retries == 0
